#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "probes.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "probes.h"

HWY_BEFORE_NAMESPACE();
namespace tkv::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

double RunFmaChains(long iterations) {
  const hn::ScalableTag<float> df;
  // 12 independent accumulators: 4-cycle latency x 2 FMA ports needs >= 8.
  // Distinct starting values, or the compiler merges the identical chains.
  auto a0 = hn::Set(df, 0.f), a1 = hn::Set(df, 1.f), a2 = hn::Set(df, 2.f), a3 = hn::Set(df, 3.f);
  auto a4 = hn::Set(df, 4.f), a5 = hn::Set(df, 5.f), a6 = hn::Set(df, 6.f), a7 = hn::Set(df, 7.f);
  auto a8 = hn::Set(df, 8.f), a9 = hn::Set(df, 9.f), a10 = hn::Set(df, 10.f);
  auto a11 = hn::Set(df, 11.f);
  const auto m = hn::Set(df, 0.999999f), c = hn::Set(df, 1e-7f);
  for (long i = 0; i < iterations; ++i) {
    a0 = hn::MulAdd(a0, m, c);
    a1 = hn::MulAdd(a1, m, c);
    a2 = hn::MulAdd(a2, m, c);
    a3 = hn::MulAdd(a3, m, c);
    a4 = hn::MulAdd(a4, m, c);
    a5 = hn::MulAdd(a5, m, c);
    a6 = hn::MulAdd(a6, m, c);
    a7 = hn::MulAdd(a7, m, c);
    a8 = hn::MulAdd(a8, m, c);
    a9 = hn::MulAdd(a9, m, c);
    a10 = hn::MulAdd(a10, m, c);
    a11 = hn::MulAdd(a11, m, c);
  }
  auto s =
      hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)));
  s = hn::Add(s, hn::Add(hn::Add(a8, a9), hn::Add(a10, a11)));
  // Keep the result alive so the loop is not removed.
  volatile float sink = hn::GetLane(hn::SumOfLanes(df, s));
  (void)sink;
  return double(iterations) * 12.0 * 2.0 * double(hn::Lanes(df));
}

float ReadSum(const float* p, size_t n) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  auto s0 = hn::Zero(df), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
  for (size_t i = 0; i + 8 * N <= n; i += 8 * N) {
    s0 = hn::Add(s0, hn::LoadU(df, p + i));
    s1 = hn::Add(s1, hn::LoadU(df, p + i + N));
    s2 = hn::Add(s2, hn::LoadU(df, p + i + 2 * N));
    s3 = hn::Add(s3, hn::LoadU(df, p + i + 3 * N));
    s4 = hn::Add(s4, hn::LoadU(df, p + i + 4 * N));
    s5 = hn::Add(s5, hn::LoadU(df, p + i + 5 * N));
    s6 = hn::Add(s6, hn::LoadU(df, p + i + 6 * N));
    s7 = hn::Add(s7, hn::LoadU(df, p + i + 7 * N));
  }
  const auto s =
      hn::Add(hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)), hn::Add(hn::Add(s4, s5), hn::Add(s6, s7)));
  return hn::GetLane(hn::SumOfLanes(df, s));
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::bench {
HWY_EXPORT(RunFmaChains);
HWY_EXPORT(ReadSum);
float read_sum(const float* p, size_t n) {
  return HWY_DYNAMIC_DISPATCH(ReadSum)(p, n);
}
double run_fma_chains(long iterations) {
  return HWY_DYNAMIC_DISPATCH(RunFmaChains)(iterations);
}
}  // namespace tkv::bench
#endif
