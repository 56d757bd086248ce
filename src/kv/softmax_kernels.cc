#include "kv/softmax_kernels.h"

#include <algorithm>
#include <cmath>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kv/softmax_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tkv::kv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(x) for x in [-100, 0] (softmax arguments after subtracting the max),
// relative error < 3e-6: 2^t = 2^n * 2^f with n = round(t), f in [-1/2, 1/2],
// 2^f by its degree-5 Taylor polynomial. About half the work of hn::Exp,
// which matters: decode evaluates one exponential per key per query head.
template <class D, class V>
HWY_INLINE V FastExp(D d, V x) {
  const hn::RebindToSigned<D> di;
  const auto t = hn::Mul(hn::Max(x, hn::Set(d, -100.0f)), hn::Set(d, 1.44269504088896341f));
  const auto n = hn::Round(t);
  const auto f = hn::Sub(t, n);
  auto p = hn::Set(d, 1.3333558146428443e-3f);
  p = hn::MulAdd(p, f, hn::Set(d, 9.6181291076284772e-3f));
  p = hn::MulAdd(p, f, hn::Set(d, 5.5504108664821580e-2f));
  p = hn::MulAdd(p, f, hn::Set(d, 0.24022650695910071f));
  p = hn::MulAdd(p, f, hn::Set(d, 0.69314718055994531f));
  p = hn::MulAdd(p, f, hn::Set(d, 1.0f));
  // 2^n for n in [-145, 0]: split so each factor is a normal float.
  const auto ni = hn::ConvertTo(di, n);
  const auto half = hn::ShiftRight<1>(ni);
  const auto s1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(half, hn::Set(di, 127))));
  const auto s2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::Sub(ni, half), hn::Set(di, 127))));
  return hn::Mul(hn::Mul(p, s1), s2);
}

void OnlineSoftmaxTile(float* scores, size_t stride, int rows, int len, float* m, float* l,
                       float* corr) {
  const hn::ScalableTag<float> d;
  const int N = int(hn::Lanes(d));
  const auto masked = hn::Set(d, kMaskedScore * 0.5f);
  for (int r = 0; r < rows; ++r) {
    float* x = scores + size_t(r) * stride;
    auto vmax = hn::Set(d, kMaskedScore);
    int i = 0;
    for (; i + N <= len; i += N) vmax = hn::Max(vmax, hn::LoadU(d, x + i));
    float mx = hn::GetLane(hn::MaxOfLanes(d, vmax));
    for (int j = i; j < len; ++j) mx = std::max(mx, x[j]);
    if (mx <= kMaskedScore * 0.5f) {  // nothing visible in this tile
      std::fill(x, x + len, 0.0f);
      corr[r] = 1.0f;
      continue;
    }
    const float m_new = std::max(m[r], mx);
    corr[r] = m[r] <= kMaskedScore * 0.5f ? 0.0f : std::exp(m[r] - m_new);
    const auto vm = hn::Set(d, m_new);
    auto sum = hn::Zero(d);
    for (i = 0; i + N <= len; i += N) {
      const auto v = hn::LoadU(d, x + i);
      const auto e = hn::IfThenZeroElse(hn::Lt(v, masked), FastExp(d, hn::Sub(v, vm)));
      hn::StoreU(e, d, x + i);
      sum = hn::Add(sum, e);
    }
    float tail = 0.0f;
    for (; i < len; ++i) {
      x[i] = x[i] <= kMaskedScore * 0.5f ? 0.0f : std::exp(std::max(x[i] - m_new, -100.0f));
      tail += x[i];
    }
    l[r] = l[r] * corr[r] + hn::GetLane(hn::SumOfLanes(d, sum)) + tail;
    m[r] = m_new;
  }
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
HWY_EXPORT(ScaleInPlace);
HWY_EXPORT(OnlineSoftmaxTile);

void online_softmax_tile(float* scores, size_t stride, int rows, int len, float* m, float* l,
                         float* corr) {
  HWY_DYNAMIC_DISPATCH(OnlineSoftmaxTile)(scores, stride, rows, len, m, l, corr);
}
HWY_EXPORT(AddScaled);

void scale_in_place(float* x, size_t n, float s) {
  HWY_DYNAMIC_DISPATCH(ScaleInPlace)(x, n, s);
}
void add_scaled(const float* x, size_t n, float s, float* y) {
  HWY_DYNAMIC_DISPATCH(AddScaled)(x, n, s, y);
}
}  // namespace tkv::kv
#endif
