#include "kv/page_summary.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kv/page_summary.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tkv::kv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// max over g of scale * sum_c max(q_gc * min_c, q_gc * max_c). Decode bounds
// every page of the context per KV head, so this is a vector kernel: the
// int8 codes widen to floats once per chunk of channels.
float BoundMax(const float* q, int G, const uint8_t* summary, int head_dim) {
  const hn::ScalableTag<float> d;
  const hn::Rebind<int32_t, decltype(d)> di;
  const hn::Rebind<int8_t, decltype(d)> d8;
  const int N = int(hn::Lanes(d));
  float scale;
  std::memcpy(&scale, summary, sizeof scale);
  const int8_t* mn = reinterpret_cast<const int8_t*>(summary + sizeof(float));
  const int8_t* mx = mn + head_dim;
  float best = -std::numeric_limits<float>::infinity();
  for (int g = 0; g < G; ++g) {
    const float* qg = q + size_t(g) * head_dim;
    auto acc = hn::Zero(d);
    int c = 0;
    for (; c + N <= head_dim; c += N) {
      const auto lo = hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, mn + c)));
      const auto hi = hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, mx + c)));
      const auto vq = hn::LoadU(d, qg + c);
      acc = hn::Add(acc, hn::Max(hn::Mul(vq, lo), hn::Mul(vq, hi)));
    }
    float s = hn::GetLane(hn::SumOfLanes(d, acc));
    for (; c < head_dim; ++c) s += std::max(qg[c] * float(mn[c]), qg[c] * float(mx[c]));
    best = std::max(best, s);
  }
  return best * scale;  // scale > 0: the max commutes with it
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv::kv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kv {

HWY_EXPORT(BoundMax);

namespace {
constexpr float kCodeMax = 127.0f;
}  // namespace

void summary_reset(float* lo, float* hi, int head_dim) {
  std::fill(lo, lo + head_dim, std::numeric_limits<float>::infinity());
  std::fill(hi, hi + head_dim, -std::numeric_limits<float>::infinity());
}

void summary_extend(const Codec& k_codec, const uint8_t* k_page, int page_tokens, int from, int to,
                    float* lo, float* hi, float* work) {
  const int hd = k_codec.head_dim();
  for (int t = from; t < to; ++t) {
    k_codec.decode(k_page, page_tokens, t, work);
    for (int c = 0; c < hd; ++c) {
      lo[c] = std::min(lo[c], work[c]);
      hi[c] = std::max(hi[c], work[c]);
    }
  }
}

void summary_store(const float* lo, const float* hi, int head_dim, uint8_t* summary) {
  float absmax = 0;
  for (int c = 0; c < head_dim; ++c)
    absmax = std::max({absmax, std::fabs(lo[c]), std::fabs(hi[c])});
  // A little head room so that rounding outward never needs a code past 127.
  const float scale = absmax > 0 ? absmax / (kCodeMax - 1.0f) : 1.0f;
  std::memcpy(summary, &scale, sizeof scale);
  int8_t* mn = reinterpret_cast<int8_t*>(summary + sizeof(float));
  int8_t* mx = mn + head_dim;
  for (int c = 0; c < head_dim; ++c) {
    float a = std::floor(lo[c] / scale), b = std::ceil(hi[c] / scale);
    // The division rounds; step outward until the dequantized bound covers.
    while (a * scale > lo[c]) a -= 1.0f;
    while (b * scale < hi[c]) b += 1.0f;
    mn[c] = int8_t(std::clamp(a, -kCodeMax, kCodeMax));
    mx[c] = int8_t(std::clamp(b, -kCodeMax, kCodeMax));
  }
}

void summarize_keys(const Codec& k_codec, const uint8_t* k_page, int page_tokens, int filled,
                    uint8_t* summary, float* work) {
  const int hd = k_codec.head_dim();
  float lo[1024], hi[1024];
  summary_reset(lo, hi, hd);
  summary_extend(k_codec, k_page, page_tokens, 0, filled, lo, hi, work);
  summary_store(lo, hi, hd, summary);
}

void summarize_vectors(const float* keys, int n, int head_dim, uint8_t* summary) {
  float lo[1024], hi[1024];
  summary_reset(lo, hi, head_dim);
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < head_dim; ++c) {
      const float x = keys[size_t(t) * head_dim + c];
      lo[c] = std::min(lo[c], x);
      hi[c] = std::max(hi[c], x);
    }
  summary_store(lo, hi, head_dim, summary);
}

float summary_bound(const float* q, const uint8_t* summary, int head_dim) {
  return HWY_DYNAMIC_DISPATCH(BoundMax)(q, 1, summary, head_dim);
}

float summary_bound_max(const float* q, int G, const uint8_t* summary, int head_dim) {
  return HWY_DYNAMIC_DISPATCH(BoundMax)(q, G, summary, head_dim);
}

}  // namespace tkv::kv
#endif
