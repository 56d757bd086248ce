#include "bench_softmax.h"

#include <cmath>
#include <cstddef>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench_softmax.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// (must follow foreach_target.h: it is re-included per target)
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tkv::bench::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

float OnlineSoftmaxStep(float* s, int n, float& m, float& l) {
  const hn::ScalableTag<float> d;
  const int N = int(hn::Lanes(d));
  auto vmax = hn::Set(d, -1e30f);
  int i = 0;
  for (; i + N <= n; i += N) vmax = hn::Max(vmax, hn::LoadU(d, s + i));
  float mx = hn::GetLane(hn::MaxOfLanes(d, vmax));
  for (; i < n; ++i) mx = s[i] > mx ? s[i] : mx;
  const float m_new = mx > m ? mx : m;
  const auto vm = hn::Set(d, m_new);
  auto sum = hn::Zero(d);
  for (i = 0; i + N <= n; i += N) {
    const auto e = hn::CallExp(d, hn::Sub(hn::LoadU(d, s + i), vm));
    hn::StoreU(e, d, s + i);
    sum = hn::Add(sum, e);
  }
  float total = hn::GetLane(hn::SumOfLanes(d, sum));
  for (; i < n; ++i) {
    s[i] = std::exp(s[i] - m_new);
    total += s[i];
  }
  const float corr = std::exp(m - m_new);
  l = l * corr + total;
  m = m_new;
  return corr;
}

}  // namespace tkv::bench::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::bench {
HWY_EXPORT(OnlineSoftmaxStep);
float online_softmax_step(float* s, int n, float& m, float& l) {
  return HWY_DYNAMIC_DISPATCH(OnlineSoftmaxStep)(s, n, m, l);
}
}  // namespace tkv::bench
#endif
