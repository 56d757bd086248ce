// ggml block codecs q8_0 and q4_0 (and q8_0h / q4_0h, which first rotate the
// head vector by the layer's R, as llama.cpp now does for quantized caches).
//
// A slot is one row of head_dim / B blocks, B = 32 (ggml's QK8_0 / QK4_0)
// when head_dim is a multiple of 32, else B = head_dim (one block per
// vector; e.g. head_dim 8). Rows follow each other: slot t at t * row bytes.
//   q8_0 block (2 + B bytes):   f16 d, int8 q[B];           x_j = d * q_j
//   q4_0 block (2 + B/2 bytes): f16 d, u8 qs[B/2]; x_j = d * ((qs[j] & 15) - 8),
//                               x_{j + B/2} = d * ((qs[j] >> 4) - 8)
// Quantization follows ggml's reference (quantize_row_q8_0_ref /
// quantize_row_q4_0_ref) bit for bit: q8_0 d = amax / 127, q = round(x / d);
// q4_0 d = (the value of largest magnitude) / -8, q = min(15, int(x / d + 8.5)).
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "common/f16.h"
#include "kv/codec/codec_internal.h"
#include "kv/codec/kernels.h"

namespace tkv::kv::detail {

namespace {

constexpr int kMaxDim = 4096;

class BlockCodec final : public Codec {
 public:
  BlockCodec(const CodecSpec& spec, int head_dim, std::shared_ptr<const Rotation> rotation)
      : Codec(spec, head_dim),
        rotation_(std::move(rotation)),
        q4_(spec.kind == CodecKind::Q4_0),
        block_(head_dim % 32 == 0 ? 32 : head_dim),
        block_bytes_(2 + (q4_ ? block_ / 2 : block_)),
        row_bytes_(head_dim / block_ * block_bytes_) {}

  size_t page_bytes(int page_tokens) const override { return size_t(page_tokens) * row_bytes_; }

  void encode(const float* x, uint8_t* page, int page_tokens, int slot) const override {
    check_slot(spec_, page_tokens, slot);
    const int d = head_dim_;
    for (int i = 0; i < d; ++i)
      if (!std::isfinite(x[i])) reject_non_finite(spec_, d, x);
    float y[kMaxDim];
    if (rotation_) {
      rotation_->apply(x, y);
    } else {
      std::memcpy(y, x, sizeof(float) * d);
    }
    uint8_t* row = page + size_t(slot) * row_bytes_;
    for (int b = 0; b < d / block_; ++b) {
      uint8_t* blk = row + size_t(b) * block_bytes_;
      const float* v = y + b * block_;
      if (q4_) {
        quantize_q4_0(v, blk);
      } else {
        quantize_q8_0(v, blk);
      }
    }
  }

  void decode(const uint8_t* page, int page_tokens, int slot, float* x) const override {
    check_slot(spec_, page_tokens, slot);
    const uint8_t* row = page + size_t(slot) * row_bytes_;
    for (int b = 0; b < head_dim_ / block_; ++b) {
      const uint8_t* blk = row + size_t(b) * block_bytes_;
      uint16_t h;
      std::memcpy(&h, blk, 2);
      const float scale = f16_to_f32(h);
      float* out = x + b * block_;
      if (q4_) {
        const int half = block_ / 2;
        for (int j = 0; j < half; ++j) {
          out[j] = scale * float((blk[2 + j] & 15) - 8);
          out[j + half] = scale * float((blk[2 + j] >> 4) - 8);
        }
      } else {
        for (int j = 0; j < block_; ++j) out[j] = scale * float(int8_t(blk[2 + j]));
      }
    }
    if (rotation_) rotation_->apply_transpose(x, x);
  }

  size_t prepared_query_floats() const override { return size_t(head_dim_); }
  void prepare_queries(const float* q, int G, float* prepared) const override {
    for (int g = 0; g < G; ++g) {
      if (rotation_) {
        rotation_->apply(q + size_t(g) * head_dim_, prepared + size_t(g) * head_dim_);
      } else {
        std::memcpy(prepared + size_t(g) * head_dim_, q + size_t(g) * head_dim_,
                    sizeof(float) * head_dim_);
      }
    }
  }
  void score(const float* prepared, int G, const uint8_t* page, int page_tokens, int begin, int end,
             float* scores, size_t stride) const override {
    check_range(spec_, page_tokens, begin, end);
    kernels::score_blocks(prepared, G, head_dim_, block_, q4_, page + size_t(begin) * row_bytes_,
                          end - begin, scores, stride);
  }
  bool values_rotated() const override { return rotation_ != nullptr; }
  void accumulate(const float* p, int G, size_t stride, const uint8_t* page, int page_tokens,
                  int begin, int end, float* acc) const override {
    check_range(spec_, page_tokens, begin, end);
    kernels::accumulate_blocks(p, G, stride, page + size_t(begin) * row_bytes_, end - begin,
                               head_dim_, block_, q4_, acc);
  }
  void unrotate(float* acc, int G) const override {
    if (!rotation_) return;
    for (int g = 0; g < G; ++g)
      rotation_->apply_transpose(acc + size_t(g) * head_dim_, acc + size_t(g) * head_dim_);
  }

 private:
  void store_scale(float d, uint8_t* blk) const {
    const uint16_t h = f32_to_f16(d);
    if ((h & 0x7c00) == 0x7c00) reject_f16_overflow(spec_, head_dim_, "block scale", d);
    std::memcpy(blk, &h, 2);
  }
  void quantize_q8_0(const float* v, uint8_t* blk) const {
    float amax = 0;
    for (int j = 0; j < block_; ++j) amax = std::max(amax, std::abs(v[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    store_scale(d, blk);
    for (int j = 0; j < block_; ++j) blk[2 + j] = uint8_t(int8_t(std::lround(v[j] * id)));
  }
  void quantize_q4_0(const float* v, uint8_t* blk) const {
    float amax = 0, max = 0;
    for (int j = 0; j < block_; ++j) {
      if (amax < std::abs(v[j])) {
        amax = std::abs(v[j]);
        max = v[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    store_scale(d, blk);
    const int half = block_ / 2;
    for (int j = 0; j < half; ++j) {
      const int q0 = std::min(15, int(int8_t(v[j] * id + 8.5f)));
      const int q1 = std::min(15, int(int8_t(v[half + j] * id + 8.5f)));
      blk[2 + j] = uint8_t(q0 | (q1 << 4));
    }
  }

  std::shared_ptr<const Rotation> rotation_;
  bool q4_;
  int block_, block_bytes_, row_bytes_;
};

}  // namespace

std::unique_ptr<Codec> make_block_codec(const CodecSpec& spec, int head_dim,
                                        std::shared_ptr<const Rotation> rotation) {
  if (head_dim > kMaxDim || (spec.kind == CodecKind::Q4_0 && head_dim % 2 != 0))
    fail("kv codec ", spec.name(), ": head_dim ", head_dim, " is not supported (",
         spec.kind == CodecKind::Q4_0 ? "an even number" : "a number", " up to ", kMaxDim,
         " is needed)");
  return std::make_unique<BlockCodec>(spec, head_dim, std::move(rotation));
}

}  // namespace tkv::kv::detail
