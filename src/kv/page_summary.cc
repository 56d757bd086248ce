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
// A stored summary's parts: scale, then head_dim int8 minima and maxima.
struct SummaryCodes {
  float scale;
  const int8_t* mn;
  const int8_t* mx;
  SummaryCodes(const uint8_t* summary, int head_dim) {
    std::memcpy(&scale, summary, sizeof scale);
    mn = reinterpret_cast<const int8_t*>(summary + sizeof(float));
    mx = mn + head_dim;
  }
};

float BoundMax(const float* q, int G, const uint8_t* summary, int head_dim) {
  const hn::ScalableTag<float> d;
  const hn::Rebind<int32_t, decltype(d)> di;
  const hn::Rebind<int8_t, decltype(d)> d8;
  const int N = int(hn::Lanes(d));
  const auto [scale, mn, mx] = SummaryCodes(summary, head_dim);
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

// BoundMax of each of n summaries for the same G queries of NV vectors each,
// in one call: the bound pass of a decode step visits every page of the
// context per KV head. Each summary's codes widen to floats once for the
// whole group, and with G and NV known the loops unroll into independent
// chains, so the latency of one summary's horizontal sums hides behind the
// next one's work. The same operations in the same order per query as
// BoundMax (acc from zero over the vectors in order, one SumOfLanes, the
// max over g, times the scale), so the same bits.
template <int G, int NV, class D>
void BoundsMaxFixed(D d, const float* HWY_RESTRICT q, const uint8_t* const* summaries, size_t n,
                    float* HWY_RESTRICT out) {
  const hn::Rebind<int32_t, D> di;
  const hn::Rebind<int8_t, D> d8;
  using V = hn::Vec<D>;
  const int N = int(hn::Lanes(d));
  const int head_dim = NV * N;
  constexpr size_t kAhead = 16;  // summaries prefetched ahead (about 2 KiB at head_dim 64)
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      for (int b = 0; b < 4 + 2 * head_dim; b += 64) __builtin_prefetch(summaries[i + kAhead] + b);
    }
    const auto [scale, mn, mx] = SummaryCodes(summaries[i], head_dim);
    V lo[NV], hi[NV];
    for (int j = 0; j < NV; ++j) {
      lo[j] = hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, mn + j * N)));
      hi[j] = hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, mx + j * N)));
    }
    float best = -std::numeric_limits<float>::infinity();
    for (int g = 0; g < G; ++g) {
      V acc = hn::Zero(d);
      for (int j = 0; j < NV; ++j) {
        const V vq = hn::LoadU(d, q + size_t(g) * head_dim + j * N);
        acc = hn::Add(acc, hn::Max(hn::Mul(vq, lo[j]), hn::Mul(vq, hi[j])));
      }
      best = std::max(best, hn::GetLane(hn::SumOfLanes(d, acc)));
    }
    out[i] = best * scale;
  }
}

// The group sizes and head sizes (in vectors) models have: G in 1..8 and
// NV in 1..16 (head_dim 64 / 128 / 256 with 4 to 16 lanes); others take
// BoundMax per summary.
template <int G, class D>
bool BoundsMaxOfGroup(D d, int nv, const float* q, const uint8_t* const* summaries, size_t n,
                      float* out) {
  switch (nv) {
    case 1:
      BoundsMaxFixed<G, 1>(d, q, summaries, n, out);
      return true;
    case 2:
      BoundsMaxFixed<G, 2>(d, q, summaries, n, out);
      return true;
    case 4:
      BoundsMaxFixed<G, 4>(d, q, summaries, n, out);
      return true;
    case 8:
      BoundsMaxFixed<G, 8>(d, q, summaries, n, out);
      return true;
    case 16:
      BoundsMaxFixed<G, 16>(d, q, summaries, n, out);
      return true;
    default:
      return false;
  }
}

void BoundsMax(const float* q, int G, const uint8_t* const* summaries, size_t n, int head_dim,
               float* out) {
  const hn::ScalableTag<float> d;
  const int N = int(hn::Lanes(d));
  const int nv = head_dim / N;
  bool done = false;
  if (head_dim % N == 0) {
    switch (G) {
      case 1:
        done = BoundsMaxOfGroup<1>(d, nv, q, summaries, n, out);
        break;
      case 2:
        done = BoundsMaxOfGroup<2>(d, nv, q, summaries, n, out);
        break;
      case 4:
        done = BoundsMaxOfGroup<4>(d, nv, q, summaries, n, out);
        break;
      case 8:
        done = BoundsMaxOfGroup<8>(d, nv, q, summaries, n, out);
        break;
      default:
        break;
    }
  }
  if (!done)
    for (size_t i = 0; i < n; ++i) out[i] = BoundMax(q, G, summaries[i], head_dim);
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv::kv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kv {

HWY_EXPORT(BoundMax);
HWY_EXPORT(BoundsMax);

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

void summary_bounds_max(const float* q, int G, const uint8_t* const* summaries, size_t n,
                        int head_dim, float* out) {
  HWY_DYNAMIC_DISPATCH(BoundsMax)(q, G, summaries, n, head_dim, out);
}

}  // namespace tkv::kv
#endif
