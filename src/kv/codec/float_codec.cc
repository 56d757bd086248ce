// f32 and f16 codecs: row-major pages, slot t at bytes [t * row, (t+1) * row)
// with row = head_dim * 4 (f32) or head_dim * 2 (f16, IEEE binary16, little
// endian). No rotation; values accumulate in the original domain. Any
// page_tokens is accepted (the store also uses the f16 codec for its sink and
// residual areas, whose capacities are arbitrary).
#include <cmath>
#include <cstring>
#include <type_traits>

#include "common/error.h"
#include "common/f16.h"
#include "kv/codec/codec_internal.h"
#include "kv/codec/kernels.h"

namespace tkv::kv::detail {

namespace {

// Elem = float (f32) or uint16_t (f16 bits): one row of Elem per slot.
template <class Elem>
class RowCodec final : public Codec {
  static constexpr bool kF32 = std::is_same_v<Elem, float>;

 public:
  explicit RowCodec(int head_dim)
      : Codec(CodecSpec{kF32 ? CodecKind::F32 : CodecKind::F16}, head_dim) {}

  size_t page_bytes(int page_tokens) const override {
    return size_t(page_tokens) * head_dim_ * sizeof(Elem);
  }
  void encode(const float* x, uint8_t* page, int page_tokens, int slot) const override {
    check_slot(spec_, page_tokens, slot);
    if constexpr (kF32) {
      for (int i = 0; i < head_dim_; ++i)
        if (!std::isfinite(x[i])) reject_non_finite(spec_, head_dim_, x);
      std::memcpy(row(page, slot), x, size_t(head_dim_) * sizeof(float));
    } else if (!kernels::encode_f16_row(x, head_dim_, row(page, slot))) {  // an Inf/NaN came out
      for (int i = 0; i < head_dim_; ++i) {
        if (!std::isfinite(x[i])) reject_non_finite(spec_, head_dim_, x);
        if ((f32_to_f16(x[i]) & 0x7c00) == 0x7c00)
          reject_f16_overflow(spec_, head_dim_, "value", x[i]);
      }
    }
  }
  void decode(const uint8_t* page, int page_tokens, int slot, float* x) const override {
    check_slot(spec_, page_tokens, slot);
    const Elem* in = row(page, slot);
    if constexpr (kF32) {
      std::memcpy(x, in, size_t(head_dim_) * sizeof(float));
    } else {
      for (int i = 0; i < head_dim_; ++i) x[i] = f16_to_f32(in[i]);
    }
  }
  void copy_slot(const uint8_t* src, int src_tokens, int src_slot, uint8_t* dst, int dst_tokens,
                 int dst_slot) const override {
    check_slot(spec_, src_tokens, src_slot);
    check_slot(spec_, dst_tokens, dst_slot);
    std::memcpy(row(dst, dst_slot), row(src, src_slot), size_t(head_dim_) * sizeof(Elem));
  }
  size_t prepared_query_floats() const override { return size_t(head_dim_); }
  void prepare_queries(const float* q, int G, float* prepared) const override {
    std::memcpy(prepared, q, size_t(G) * head_dim_ * sizeof(float));
  }
  void score(const float* prepared, int G, const uint8_t* page, int page_tokens, int begin, int end,
             float* scores, size_t stride) const override {
    check_range(spec_, page_tokens, begin, end);
    if constexpr (kF32) {
      kernels::score_rows_f32(prepared, G, head_dim_, row(page, begin), end - begin, scores,
                              stride);
    } else {
      kernels::score_rows_f16(prepared, G, head_dim_, row(page, begin), end - begin, scores,
                              stride);
    }
  }
  bool values_rotated() const override { return false; }
  void accumulate(const float* p, int G, size_t stride, const uint8_t* page, int page_tokens,
                  int begin, int end, float* acc) const override {
    check_range(spec_, page_tokens, begin, end);
    if constexpr (kF32) {
      kernels::accumulate_rows_f32(p, G, stride, row(page, begin), end - begin, head_dim_, acc);
    } else {
      kernels::accumulate_rows_f16(p, G, stride, row(page, begin), end - begin, head_dim_, acc);
    }
  }
  void unrotate(float*, int) const override {}

 private:
  const Elem* row(const uint8_t* page, int slot) const {
    return reinterpret_cast<const Elem*>(page) + size_t(slot) * head_dim_;
  }
  Elem* row(uint8_t* page, int slot) const {
    return reinterpret_cast<Elem*>(page) + size_t(slot) * head_dim_;
  }
};

}  // namespace

std::unique_ptr<Codec> make_float_codec(const CodecSpec& spec, int head_dim) {
  if (spec.kind == CodecKind::F32) return std::make_unique<RowCodec<float>>(head_dim);
  return std::make_unique<RowCodec<uint16_t>>(head_dim);
}

}  // namespace tkv::kv::detail
