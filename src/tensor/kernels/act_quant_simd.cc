// Activation quantization of the integer-dot kernels with Highway ops
// (act_blocks.h): per block a vector max of |x|, then per vector of values
// multiply, round through 1.5 * 2^23, clamp, demote to int8 and sum. The
// operations are act_quant.cc's scalar reference's, each exactly rounded
// (compiled with -ffp-contract=off: no fused multiply-add), so the bytes are
// the same on every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/act_quant_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstring>
#include <limits>

#include "hwy/highway.h"
#include "tensor/kernels/act_blocks.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DI8 = hn::Rebind<int8_t, DF>;

// Largest |x_k| of a block of K values; false if one is NaN.
template <int K>
HWY_INLINE bool BlockAmax(const float* HWY_RESTRICT x, float* amax) {
  const DF df;
  const size_t N = hn::Lanes(df);
  auto m = hn::Zero(df);
  // Eq, not Ne: Highway's Ne is ordered (false for NaN) on some targets.
  auto ordered = hn::FirstN(df, N);
  for (size_t k = 0; k < size_t(K); k += N) {
    const auto v = hn::LoadU(df, x + k);
    ordered = hn::And(ordered, hn::Eq(v, v));
    m = hn::Max(m, hn::Abs(v));
  }
  *amax = hn::GetLane(hn::MaxOfLanes(df, m));
  return hn::AllTrue(df, ordered);
}

// q[0 .. N) of the values at x with the block's 127 / amax; returns them as
// int32 lanes (for the sums).
HWY_INLINE hn::Vec<DI> QuantizeVector(const float* HWY_RESTRICT x, hn::Vec<DF> inv,
                                      int8_t* HWY_RESTRICT q) {
  const DF df;
  const DI di;
  const auto magic = hn::Set(df, 12582912.0f);  // 1.5 * 2^23
  auto v = hn::Sub(hn::Add(hn::Mul(hn::LoadU(df, x), inv), magic), magic);
  // NaN (an infinite x times inv = 0) -> 0, else clamp to +-127.
  v = hn::IfThenElseZero(hn::Eq(v, v), v);
  v = hn::Min(hn::Max(v, hn::Set(df, -127.0f)), hn::Set(df, 127.0f));
  const auto qi = hn::ConvertTo(di, v);
  hn::StoreU(hn::DemoteTo(DI8(), qi), DI8(), q);
  return qi;
}

// d and q of one block of K values; returns sum of q, and with bsums the
// sums of its 16-value groups.
template <int K>
HWY_INLINE int QuantizeBlock(const float* HWY_RESTRICT x, float* d, int8_t* HWY_RESTRICT q,
                             int16_t* HWY_RESTRICT bsums) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  float amax;
  if (!BlockAmax<K>(x, &amax)) {
    *d = std::numeric_limits<float>::quiet_NaN();
    std::memset(q, 0, size_t(K));
    if (bsums) std::memset(bsums, 0, 16 * sizeof(int16_t));
    return 0;
  }
  *d = K == 32 ? kernels::act_scale32(amax) : amax / 127.0f;
  const auto inv = hn::Set(df, amax > 0.0f ? 127.0f / amax : 0.0f);
  if (bsums == nullptr) {
    auto sum = hn::Zero(di);
    for (size_t k = 0; k < size_t(K); k += N) sum = hn::Add(sum, QuantizeVector(x + k, inv, q + k));
    return hn::GetLane(hn::SumOfLanes(di, sum));
  }
  // N divides 16: each 16-value group is whole vectors.
  int total = 0;
  for (size_t g = 0; g < size_t(K) / 16; ++g) {
    auto sum = hn::Zero(di);
    for (size_t k = 16 * g; k < 16 * g + 16; k += N)
      sum = hn::Add(sum, QuantizeVector(x + k, inv, q + k));
    const int s = hn::GetLane(hn::SumOfLanes(di, sum));
    bsums[g] = int16_t(s);
    total += s;
  }
  return total;
}

void QuantizeAct(kernels::ActFormat format, const float* x, int64_t cols, uint8_t* dst) {
  static_assert(16 % hn::MaxLanes(DF()) == 0, "16-value groups must be whole vectors");
  if (format == kernels::ActFormat::kQ8x32) {
    auto* b = reinterpret_cast<kernels::ActBlock32*>(dst);
    for (int64_t i = 0; i < cols / 32; ++i, x += 32) {
      b[i].sum = int16_t(QuantizeBlock<32>(x, &b[i].d, b[i].q, nullptr));
      b[i].pad = 0;
    }
  } else if (format == kernels::ActFormat::kQ8x256) {
    auto* b = reinterpret_cast<kernels::ActBlock256*>(dst);
    for (int64_t i = 0; i < cols / 256; ++i, x += 256) {
      QuantizeBlock<256>(x, &b[i].d, b[i].q, b[i].bsums);
      for (int k = 0; k < 8; ++k)
        b[i].psums[k] = int16_t(b[i].bsums[2 * k] + b[i].bsums[2 * k + 1]);
      std::memset(b[i].pad, 0, sizeof(b[i].pad));
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kernels {
HWY_EXPORT(QuantizeAct);

void quantize_act_simd(ActFormat format, const float* x, int64_t cols, uint8_t* dst) {
  HWY_DYNAMIC_DISPATCH(QuantizeAct)(format, x, cols, dst);
}
}  // namespace tkv::kernels
#endif  // HWY_ONCE
