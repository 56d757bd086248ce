#include "kv/softmax_kernels.h"

#include <algorithm>
#include <cmath>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kv/softmax_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tkv::kv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

float MaxOf(const float* x, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  auto m = hn::Set(d, kMaskedScore);
  size_t i = 0;
  for (; i + N <= n; i += N) m = hn::Max(m, hn::LoadU(d, x + i));
  float r = hn::GetLane(hn::MaxOfLanes(d, m));
  for (; i < n; ++i) r = x[i] > r ? x[i] : r;
  return r;
}

float ExpAndSum(float* x, size_t n, float m) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto vm = hn::Set(d, m);
  const auto masked = hn::Set(d, kMaskedScore * 0.5f);
  // exp underflows to 0 below about -103; clamp so Exp stays in its domain.
  const auto lo = hn::Set(d, -100.0f);
  auto sum = hn::Zero(d);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto v = hn::LoadU(d, x + i);
    const auto e = hn::Exp(d, hn::Max(hn::Sub(v, vm), lo));
    const auto r = hn::IfThenZeroElse(hn::Lt(v, masked), e);
    hn::StoreU(r, d, x + i);
    sum = hn::Add(sum, r);
  }
  float tail = 0.0f;
  for (; i < n; ++i) {
    x[i] = x[i] <= kMaskedScore * 0.5f ? 0.0f : std::exp(std::max(x[i] - m, -100.0f));
    tail += x[i];
  }
  return hn::GetLane(hn::SumOfLanes(d, sum)) + tail;
}

void ScaleInPlace(float* x, size_t n, float s) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto vs = hn::Set(d, s);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vs), d, x + i);
  for (; i < n; ++i) x[i] *= s;
}

void AddScaled(const float* x, size_t n, float s, float* y) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto vs = hn::Set(d, s);
  size_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::MulAdd(hn::LoadU(d, x + i), vs, hn::LoadU(d, y + i)), d, y + i);
  for (; i < n; ++i) y[i] += s * x[i];
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv::kv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kv {
HWY_EXPORT(MaxOf);
HWY_EXPORT(ExpAndSum);
HWY_EXPORT(ScaleInPlace);
HWY_EXPORT(AddScaled);

float max_of(const float* x, size_t n) { return HWY_DYNAMIC_DISPATCH(MaxOf)(x, n); }
float exp_and_sum(float* x, size_t n, float m) { return HWY_DYNAMIC_DISPATCH(ExpAndSum)(x, n, m); }
void scale_in_place(float* x, size_t n, float s) { HWY_DYNAMIC_DISPATCH(ScaleInPlace)(x, n, s); }
void add_scaled(const float* x, size_t n, float s, float* y) {
  HWY_DYNAMIC_DISPATCH(AddScaled)(x, n, s, y);
}
}  // namespace tkv::kv
#endif
