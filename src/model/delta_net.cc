#include "model/delta_net.h"

#include <cstdint>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "model/delta_net.cc"
// clang-format off
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace tkv::model::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Per row j: scale by the decay and take the dot with k (one pass), then
// add d_j k and take the dot with q (a second pass over the same row, in L1).
void DeltaRuleToken(float* HWY_RESTRICT M, const float* HWY_RESTRICT q, const float* HWY_RESTRICT k,
                    const float* HWY_RESTRICT v, float decay, float beta, float scale,
                    float* HWY_RESTRICT o, int S) {
  const hn::ScalableTag<float> d;
  const int N = int(hn::Lanes(d));
  const auto vg = hn::Set(d, decay);
  for (int j = 0; j < S; ++j) {
    float* row = M + int64_t(j) * S;
    auto acc = hn::Zero(d);
    int i = 0;
    for (; i + N <= S; i += N) {
      const auto m = hn::Mul(hn::LoadU(d, row + i), vg);
      hn::StoreU(m, d, row + i);
      acc = hn::MulAdd(m, hn::LoadU(d, k + i), acc);
    }
    float sk = hn::GetLane(hn::SumOfLanes(d, acc));
    for (; i < S; ++i) {
      row[i] *= decay;
      sk += row[i] * k[i];
    }
    const float dj = (v[j] - sk) * beta;
    const auto vd = hn::Set(d, dj);
    acc = hn::Zero(d);
    i = 0;
    for (; i + N <= S; i += N) {
      const auto m = hn::MulAdd(hn::LoadU(d, k + i), vd, hn::LoadU(d, row + i));
      hn::StoreU(m, d, row + i);
      acc = hn::MulAdd(m, hn::LoadU(d, q + i), acc);
    }
    float sq = hn::GetLane(hn::SumOfLanes(d, acc));
    for (; i < S; ++i) {
      row[i] += k[i] * dj;
      sq += row[i] * q[i];
    }
    o[j] = sq * scale;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv::model::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::model::ops {

HWY_EXPORT(DeltaRuleToken);

void delta_rule_token(float* state, const float* q, const float* k, const float* v, float decay,
                      float beta, float scale, float* o, int S) {
  HWY_DYNAMIC_DISPATCH(DeltaRuleToken)(state, q, k, v, decay, beta, scale, o, S);
}

}  // namespace tkv::model::ops
#endif
