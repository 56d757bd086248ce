#include "common/vec_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "common/vec_math.cc"
// foreach_target.h must come first, then the -inl headers.
// clang-format off
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace tkv::HWY_NAMESPACE {
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

MaxScan ScanMax(const float* HWY_RESTRICT x, size_t n) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  const float ninf = -std::numeric_limits<float>::infinity();
  const V pinf = hn::Set(d, std::numeric_limits<float>::infinity());
  const V vninf = hn::Set(d, ninf);
  V vmax = vninf;
  V bad = hn::Zero(d);
  auto step = [&](V v) {
    const auto nan = hn::IsNaN(v);
    bad = hn::Or(bad, hn::VecFromMask(d, hn::Or(nan, hn::Eq(v, pinf))));
    vmax = hn::Max(vmax, hn::IfThenElse(nan, vninf, v));  // NaN never wins
  };
  size_t i = 0;
  for (; i + N <= n; i += N) step(hn::LoadU(d, x + i));
  if (i < n) step(LoadTail(d, x + i, n - i, ninf));
  return {hn::GetLane(hn::MaxOfLanes(d, vmax)), !hn::AllFalse(d, hn::MaskFromVec(bad))};
}

double ExpWeights(const float* x, size_t n, float shift, float scale, float* w) {
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
#if HWY_TARGET == HWY_SCALAR
    s0 = hn::Add(s0, hn::PromoteTo(dd, e));
#else
    s0 = hn::Add(s0, hn::PromoteTo(dd, hn::LowerHalf(dh, e)));
    s1 = hn::Add(s1, hn::PromoteTo(dd, hn::UpperHalf(dh, e)));
#endif
    return e;
  };
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const V e = weights(hn::LoadU(d, x + i));
    if (w) hn::StoreU(e, d, w + i);
  }
  if (i < n) {
    HWY_ALIGN float out[hn::MaxLanes(decltype(d)())];
    hn::Store(weights(LoadTail(d, x + i, n - i, -std::numeric_limits<float>::infinity())), d, out);
    if (w) std::copy(out, out + (n - i), w + i);
  }
  return hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
}

void Scale(float* HWY_RESTRICT x, size_t n, float s) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto vs = hn::Set(d, s);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vs), d, x + i);
  for (; i < n; ++i) x[i] *= s;
}

void SoftCap(float* HWY_RESTRICT x, size_t n, float cap) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto vcap = hn::Set(d, cap), vinv = hn::Set(d, 1.0f / cap);
  size_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::Mul(vcap, hn::Tanh(d, hn::Mul(hn::LoadU(d, x + i), vinv))), d, x + i);
  if (i < n) {
    HWY_ALIGN float tail[hn::MaxLanes(decltype(d)())] = {};
    std::copy(x + i, x + n, tail);
    hn::Store(hn::Mul(vcap, hn::Tanh(d, hn::Mul(hn::Load(d, tail), vinv))), d, tail);
    std::copy(tail, tail + (n - i), x + i);
  }
}

}  // namespace tkv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv {

HWY_EXPORT(ScanMax);
HWY_EXPORT(ExpWeights);
HWY_EXPORT(Scale);
HWY_EXPORT(SoftCap);

MaxScan scan_max(const float* x, size_t n) {
  return HWY_DYNAMIC_DISPATCH(ScanMax)(x, n);
}

int64_t argmax(const float* x, int64_t n) {
  if (n <= 0) return 0;
  const float m = scan_max(x, size_t(n)).max;
  for (int64_t i = 0; i < n; ++i)
    if (x[i] == m) return i;
  return 0;  // every value NaN
}

double exp_weights(const float* x, size_t n, float shift, float scale, float* w) {
  return HWY_DYNAMIC_DISPATCH(ExpWeights)(x, n, shift, scale, w);
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  const float m = scan_max(x, size_t(n)).max;
  const double sum = exp_weights(x, size_t(n), m, 1.0f, x);
  HWY_DYNAMIC_DISPATCH(Scale)(x, size_t(n), float(1.0 / sum));
}

void soft_cap(float* x, size_t n, float cap) {
  HWY_DYNAMIC_DISPATCH(SoftCap)(x, n, cap);
}

double log_sum_exp(const float* x, int64_t n) {
  if (n <= 0) return -std::numeric_limits<double>::infinity();
  const float m = scan_max(x, size_t(n)).max;
  if (!std::isfinite(m)) return m;
  return double(m) + std::log(exp_weights(x, size_t(n), m, 1.0f, nullptr));
}

}  // namespace tkv
#endif  // HWY_ONCE
