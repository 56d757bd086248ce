// Highway kernels for float weight rows: F32, F16 (converted with F16C where
// the target has it) and BF16 (a shift). Any number of columns: full vectors,
// then one single vector, then a scalar tail.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/kernels_float.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstring>

#include "hwy/highway.h"
#include "tensor/kernels/float_rows-inl.h"
#include "tensor/kernels/rowdot-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

// Each row is also prefetched into L2 this far ahead (besides rowdot-inl.h's
// kPrefetchAhead into L1): one core's read stream is limited by the misses it
// has in flight, and the hardware prefetcher alone keeps too few. 24 KiB
// is far enough ahead to cover DRAM latency at one core's read rate and
// short enough to stay well inside L2; a longer lead gains nothing.
inline constexpr size_t kL2PrefetchAhead = 24 << 10;

template <class Src, int64_t R>
HWY_INLINE void DotRowsF(const uint8_t* w, size_t row_bytes, size_t cols, const float* x,
                         float* y) {
  const DF df;
  constexpr size_t kStep = 2 * kLanes;
  constexpr size_t kStepBytes = kStep * Src::kBytes;
  VF acc0[R], acc1[R];
  for (int64_t r = 0; r < R; ++r) acc0[r] = acc1[r] = hn::Zero(df);
  size_t k = 0;
  for (; k + kStep <= cols; k += kStep) {
    const VF x0 = hn::LoadU(df, x + k), x1 = hn::LoadU(df, x + k + kLanes);
    for (int64_t r = 0; r < R; ++r) {
      const uint8_t* row = w + size_t(r) * row_bytes;
      if (kStepBytes >= 64 || k % (64 / Src::kBytes) == 0) {
        hwy::Prefetch(row + k * Src::kBytes + 2 * kPrefetchAhead);
        __builtin_prefetch(row + k * Src::kBytes + kL2PrefetchAhead, 0, 2);
      }
      acc0[r] = hn::MulAdd(Src::Load(row, k), x0, acc0[r]);
      acc1[r] = hn::MulAdd(Src::Load(row, k + kLanes), x1, acc1[r]);
    }
  }
  if (k + kLanes <= cols) {
    const VF x0 = hn::LoadU(df, x + k);
    for (int64_t r = 0; r < R; ++r)
      acc0[r] = hn::MulAdd(Src::Load(w + size_t(r) * row_bytes, k), x0, acc0[r]);
    k += kLanes;
  }
  for (int64_t r = 0; r < R; ++r) {
    const uint8_t* row = w + size_t(r) * row_bytes;
    float tail = 0;
    for (size_t t = k; t < cols; ++t) tail += Src::At(row, t) * x[t];
    y[r] = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0[r], acc1[r]))) + tail;
  }
}

template <class Src>
void MatvecRowsF(const kernels::MatvecArgs& a, int64_t r0, int64_t r1) {
  const size_t cols = size_t(a.cols);
  int64_t r = r0;
  for (; r + kRowGroup <= r1; r += kRowGroup)
    DotRowsF<Src, kRowGroup>(a.w + size_t(r) * a.row_bytes, a.row_bytes, cols, a.x, a.y + r);
  for (; r < r1; ++r)
    DotRowsF<Src, 1>(a.w + size_t(r) * a.row_bytes, a.row_bytes, cols, a.x, a.y + r);
}

template <class Src>
void DequantizeF(const uint8_t* src, float* dst, size_t n) {
  const DF df;
  size_t k = 0;
  for (; k + kLanes <= n; k += kLanes) hn::StoreU(Src::Load(src, k), df, dst + k);
  for (; k < n; ++k) dst[k] = Src::At(src, k);
}

void MatvecRowsFloat(const kernels::MatvecArgs& a, int64_t r0, int64_t r1) {
  switch (a.type) {
    case DType::F32:
      return MatvecRowsF<F32Row>(a, r0, r1);
    case DType::F16:
      return MatvecRowsF<F16Row>(a, r0, r1);
    case DType::BF16:
      return MatvecRowsF<BF16Row>(a, r0, r1);
    default:
      HWY_ABORT("matvec_rows_float: type %u", unsigned(a.type));
  }
}

void DequantizeFloat(DType type, const uint8_t* src, float* dst, int64_t n) {
  switch (type) {
    case DType::F32:
      return void(std::memcpy(dst, src, size_t(n) * 4));
    case DType::F16:
      return DequantizeF<F16Row>(src, dst, size_t(n));
    case DType::BF16:
      return DequantizeF<BF16Row>(src, dst, size_t(n));
    default:
      HWY_ABORT("dequantize_float: type %u", unsigned(type));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kernels {
HWY_EXPORT(MatvecRowsFloat);
HWY_EXPORT(DequantizeFloat);

void matvec_rows_float(const MatvecArgs& a, int64_t r0, int64_t r1) {
  HWY_DYNAMIC_DISPATCH(MatvecRowsFloat)(a, r0, r1);
}
void dequantize_float(DType type, const uint8_t* src, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(DequantizeFloat)(type, src, dst, n);
}
}  // namespace tkv::kernels
#endif  // HWY_ONCE
