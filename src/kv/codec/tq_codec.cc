// TurboQuant MSE codecs tq1..tq4 (and tqNr with norm correction):
//   norm = ||x||, u = x / norm, y = R u, code_i = nearest Lloyd-Max centroid
//   of y_i; stored: bit-packed codes (tq_layout.h) and the norm as f16.
// Decoding is x = norm * R^T c[code]; the kernels never decode, they work in
// the rotated domain (scores with q' = R q, values accumulated as
// sum_t p_t * norm_t * c[code_t] and rotated back once by unrotate()).
#include <cmath>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "common/f16.h"
#include "kv/codec/codec_internal.h"
#include "kv/codec/kernels.h"
#include "kv/codec/tq_layout.h"

namespace tkv::kv::detail {

namespace {

constexpr int kMaxDim = 4096;

class TqCodec final : public Codec {
 public:
  TqCodec(const CodecSpec& spec, int head_dim, std::shared_ptr<const Rotation> rotation)
      : Codec(spec, head_dim),
        rotation_(std::move(rotation)),
        geo_(TqGeometry::make(head_dim, spec.bits)),
        centroids_(lloyd_max_centroids(spec.bits, head_dim)) {
    const int k = 1 << spec.bits;
    for (int i = 0; i + 1 < k; ++i) boundaries_[i] = 0.5f * (centroids_[i] + centroids_[i + 1]);
    for (int j = 0; j < 16; ++j) table16_[j] = centroids_[j % k];
  }

  size_t page_bytes(int page_tokens) const override {
    check_page(page_tokens);
    return geo_.page_bytes(page_tokens);
  }

  void encode(const float* x, uint8_t* page, int page_tokens, int slot) const override {
    check_page(page_tokens);
    check_slot(spec_, page_tokens, slot);
    const int d = head_dim_;
    double sum_sq = 0;
    for (int i = 0; i < d; ++i) sum_sq += double(x[i]) * x[i];
    const double norm = std::sqrt(sum_sq);  // no overflow in double for float input
    if (!std::isfinite(norm)) reject_non_finite(spec_, d, x);
    if (norm > kF16Max) reject_f16_overflow(spec_, d, "vector norm", norm);

    uint8_t codes[kMaxDim];
    float stored = 0;
    if (norm > 0) {
      float y[kMaxDim];
      const float inv = float(1.0 / norm);
      for (int i = 0; i < d; ++i) y[i] = x[i] * inv;
      rotation_->apply(y, y);
      double c_sq = 0;
      for (int i = 0; i < d; ++i) {
        codes[i] = uint8_t(nearest(y[i]));
        c_sq += double(centroids_[codes[i]]) * centroids_[codes[i]];
      }
      // tqNr: the reconstruction norm * R^T c has length norm * ||c||;
      // storing norm / ||c|| gives it the input's length.
      const double s = spec_.norm_correction ? norm / std::sqrt(c_sq) : norm;
      if (s > kF16Max) reject_f16_overflow(spec_, d, "corrected vector norm", s);
      stored = float(s);
    } else {
      std::memset(codes, 0, size_t(d));
    }
    uint8_t* tile = page + size_t(slot / kTqTileTokens) * geo_.tile_bytes;
    tq_store_codes(geo_, codes, tile, slot % kTqTileTokens);
    const uint16_t h = f32_to_f16(stored);
    std::memcpy(page + geo_.norms_offset(page_tokens) + 2 * size_t(slot), &h, 2);
  }

  void decode(const uint8_t* page, int page_tokens, int slot, float* x) const override {
    check_page(page_tokens);
    check_slot(spec_, page_tokens, slot);
    const uint8_t* tile = page + size_t(slot / kTqTileTokens) * geo_.tile_bytes;
    for (int i = 0; i < head_dim_; ++i)
      x[i] = centroids_[tq_code_at(geo_, tile, slot % kTqTileTokens, i)];
    rotation_->apply_transpose(x, x);
    uint16_t h;
    std::memcpy(&h, page + geo_.norms_offset(page_tokens) + 2 * size_t(slot), 2);
    const float norm = f16_to_f32(h);
    for (int i = 0; i < head_dim_; ++i) x[i] *= norm;
  }

  size_t prepared_query_floats() const override { return size_t(head_dim_); }
  void prepare_queries(const float* q, int G, float* prepared) const override {
    for (int g = 0; g < G; ++g)
      rotation_->apply(q + size_t(g) * head_dim_, prepared + size_t(g) * head_dim_);
  }
  void score(const float* prepared, int G, const uint8_t* page, int page_tokens, int begin, int end,
             float* scores, size_t stride) const override {
    check_page(page_tokens);
    check_range(spec_, page_tokens, begin, end);
    kernels::tq_score(geo_, table16_, prepared, G, page, page_tokens, begin, end, scores, stride);
  }

  bool values_rotated() const override { return true; }
  void accumulate(const float* p, int G, size_t stride, const uint8_t* page, int page_tokens,
                  int begin, int end, float* acc) const override {
    check_page(page_tokens);
    check_range(spec_, page_tokens, begin, end);
    kernels::tq_accumulate(geo_, table16_, p, G, stride, page, page_tokens, begin, end, acc);
  }
  void unrotate(float* acc, int G) const override {
    for (int g = 0; g < G; ++g)
      rotation_->apply_transpose(acc + size_t(g) * head_dim_, acc + size_t(g) * head_dim_);
  }

 private:
  void check_page(int page_tokens) const {
    if (page_tokens <= 0 || page_tokens % kTqTileTokens != 0)
      fail("kv codec ", spec_.name(), ": page_tokens ", page_tokens,
           " is not a positive multiple of ", kTqTileTokens);
  }
  // Index of the nearest centroid: count of midpoints below y (branchless
  // binary search over the 2^bits - 1 boundaries).
  int nearest(float y) const {
    int idx = 0;
    for (int step = (1 << spec_.bits) / 2; step >= 1; step /= 2)
      idx += (y > boundaries_[idx + step - 1]) ? step : 0;
    return idx;
  }

  std::shared_ptr<const Rotation> rotation_;
  TqGeometry geo_;
  const std::vector<float>& centroids_;
  float boundaries_[15] = {};
  alignas(64) float table16_[16] = {};
};

}  // namespace

std::unique_ptr<Codec> make_tq_codec(const CodecSpec& spec, int head_dim,
                                     std::shared_ptr<const Rotation> rotation) {
  if (head_dim % 8 != 0 || head_dim < 8 || head_dim > kMaxDim)
    fail("kv codec ", spec.name(), ": head_dim ", head_dim,
         " is not supported (tq codecs need a multiple of 8 in 8..", kMaxDim, ")");
  return std::make_unique<TqCodec>(spec, head_dim, std::move(rotation));
}

}  // namespace tkv::kv::detail
