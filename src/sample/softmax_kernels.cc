#include "sample/softmax_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "sample/softmax_kernels.cc"
// foreach_target.h must come first, then the -inl headers.
// clang-format off
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace tkv::sample::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Below this exponent float exp underflows; such weights are set to exactly 0.
constexpr float kMinExponent = -87.0f;

// The last partial vector is processed from a padded copy, so that every
// element goes through the same vector code (same rounding).
template <class D>
HWY_INLINE hn::Vec<D> LoadTail(D d, const float* x, size_t count, float pad) {
  HWY_ALIGN float buf[hn::MaxLanes(D())];
  std::fill(buf, buf + hn::Lanes(d), pad);
  std::copy(x, x + count, buf);
  return hn::Load(d, buf);
}

LogitScan ScanLogitsImpl(const float* HWY_RESTRICT x, size_t n) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  const float ninf = -std::numeric_limits<float>::infinity();
  const V pinf = hn::Set(d, std::numeric_limits<float>::infinity());
  V vmax = hn::Set(d, ninf);
  V bad = hn::Zero(d);
  auto step = [&](V v) {
    bad = hn::Or(bad, hn::VecFromMask(d, hn::Or(hn::IsNaN(v), hn::Eq(v, pinf))));
    vmax = hn::Max(vmax, v);
  };
  size_t i = 0;
  for (; i + N <= n; i += N) step(hn::LoadU(d, x + i));
  if (i < n) step(LoadTail(d, x + i, n - i, ninf));
  return {hn::GetLane(hn::MaxOfLanes(d, vmax)), !hn::AllFalse(d, hn::MaskFromVec(bad))};
}

double ExpWeightsImpl(const float* x, size_t n, float shift, float scale, float* w) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
#if HWY_TARGET == HWY_SCALAR
  const hn::Rebind<double, decltype(d)> dd;  // one lane: no halves
#else
  const hn::Half<decltype(d)> dh;
  const hn::Rebind<double, decltype(dh)> dd;
#endif
  const size_t N = hn::Lanes(d);
  const V vshift = hn::Set(d, shift);
  const V vscale = hn::Set(d, scale);
  const V vmin = hn::Set(d, kMinExponent);
  auto s0 = hn::Zero(dd), s1 = hn::Zero(dd);
  auto weights = [&](V v) {
    const V y = hn::Mul(hn::Sub(v, vshift), vscale);
    const V e = hn::IfThenElseZero(hn::Ge(y, vmin), hn::Exp(d, hn::Max(y, vmin)));
    // Sum in double: a vocabulary of 10^5 weights summed in float loses
    // digits that top-p's cut depends on.
#if HWY_TARGET == HWY_SCALAR
    s0 = hn::Add(s0, hn::PromoteTo(dd, e));
#else
    s0 = hn::Add(s0, hn::PromoteTo(dd, hn::LowerHalf(dh, e)));
    s1 = hn::Add(s1, hn::PromoteTo(dd, hn::UpperHalf(dh, e)));
#endif
    return e;
  };
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(weights(hn::LoadU(d, x + i)), d, w + i);
  if (i < n) {
    HWY_ALIGN float out[hn::MaxLanes(decltype(d)())];
    hn::Store(weights(LoadTail(d, x + i, n - i, -std::numeric_limits<float>::infinity())), d, out);
    std::copy(out, out + (n - i), w + i);
  }
  return hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
}

}  // namespace tkv::sample::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::sample {

HWY_EXPORT(ScanLogitsImpl);
HWY_EXPORT(ExpWeightsImpl);

LogitScan scan_logits(const float* x, size_t n) {
  return HWY_DYNAMIC_DISPATCH(ScanLogitsImpl)(x, n);
}

double exp_weights(const float* x, size_t n, float shift, float scale, float* w) {
  return HWY_DYNAMIC_DISPATCH(ExpWeightsImpl)(x, n, shift, scale, w);
}

}  // namespace tkv::sample
#endif  // HWY_ONCE
