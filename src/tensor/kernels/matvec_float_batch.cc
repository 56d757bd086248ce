// The small-batch product of float weights (F32/F16/BF16) with matvec's
// exact per-row accumulation order: every (row, token) takes the
// instruction sequence of kernels_float.cc's DotRowsF -- two vector FMA
// chains over steps of 2 vectors, one more vector into the first chain, a
// scalar tail, one horizontal sum of both chains plus the tail -- so token
// t's result is bit-identical to matvec(x_t), while each weight row is read
// from memory once for all tokens (it stays in L1 between token groups).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/matvec_float_batch.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstring>

#include "hwy/highway.h"
#include "tensor/kernels/decode-inl.h"
#include "tensor/kernels/matvec_batch.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {
namespace batch {

// How each float type loads N values at element offset k of a row (the same
// exact conversions as kernels_float.cc).
struct F32Row {
  static HWY_INLINE VF Load(const uint8_t* row, size_t k) {
    return hn::LoadU(DF(), reinterpret_cast<const float*>(row) + k);
  }
  static HWY_INLINE float At(const uint8_t* row, size_t k) {
    float v;
    std::memcpy(&v, row + 4 * k, 4);
    return v;
  }
};
struct F16Row {
  static HWY_INLINE VF Load(const uint8_t* row, size_t k) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(DF(), hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(row) + k));
  }
  static HWY_INLINE float At(const uint8_t* row, size_t k) { return HalfAt(row + 2 * k); }
};
struct BF16Row {
  static HWY_INLINE VF Load(const uint8_t* row, size_t k) {
    const hn::Rebind<hwy::bfloat16_t, DF> db;
    return hn::PromoteTo(DF(), hn::LoadU(db, reinterpret_cast<const hwy::bfloat16_t*>(row) + k));
  }
  static HWY_INLINE float At(const uint8_t* row, size_t k) {
    uint16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    return bf16_to_f32(h);
  }
};

// One row against N tokens (x_t = x + t * cols, result to y[t * y_stride]).
template <class Src, int64_t N>
HWY_INLINE void DotRowTokens(const uint8_t* row, size_t cols, const float* x, float* y,
                             int64_t y_stride) {
  const DF df;
  constexpr size_t kStep = 2 * kLanes;
  VF acc0[N], acc1[N];
  for (int64_t t = 0; t < N; ++t) acc0[t] = acc1[t] = hn::Zero(df);
  size_t k = 0;
  for (; k + kStep <= cols; k += kStep) {
    const VF w0 = Src::Load(row, k), w1 = Src::Load(row, k + kLanes);
    for (int64_t t = 0; t < N; ++t) {
      const float* xt = x + size_t(t) * cols;
      acc0[t] = hn::MulAdd(w0, hn::LoadU(df, xt + k), acc0[t]);
      acc1[t] = hn::MulAdd(w1, hn::LoadU(df, xt + k + kLanes), acc1[t]);
    }
  }
  if (k + kLanes <= cols) {
    const VF w0 = Src::Load(row, k);
    for (int64_t t = 0; t < N; ++t)
      acc0[t] = hn::MulAdd(w0, hn::LoadU(df, x + size_t(t) * cols + k), acc0[t]);
    k += kLanes;
  }
  for (int64_t t = 0; t < N; ++t) {
    const float* xt = x + size_t(t) * cols;
    float tail = 0;
    for (size_t i = k; i < cols; ++i) tail += Src::At(row, i) * xt[i];
    y[t * y_stride] = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0[t], acc1[t]))) + tail;
  }
}

// Tokens per pass over a row: 2 x 4 accumulators, 2 weight vectors and the
// x loads fit the 16 vector registers of AVX2.
constexpr int64_t kTokens = 4;

template <class Src>
void RowsTokens(const kernels::MatvecArgs& a, int64_t n, int64_t y_stride, int64_t r0, int64_t r1) {
  const size_t cols = size_t(a.cols);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = a.w + size_t(r) * a.row_bytes;
    int64_t t = 0;
    for (; t + kTokens <= n; t += kTokens)
      DotRowTokens<Src, kTokens>(row, cols, a.x + size_t(t) * cols, a.y + t * y_stride + r,
                                 y_stride);
    for (; t < n; ++t)
      DotRowTokens<Src, 1>(row, cols, a.x + size_t(t) * cols, a.y + t * y_stride + r, y_stride);
  }
}

}  // namespace batch

void MatvecRowsFloatBatch(const kernels::MatvecArgs& a, int64_t n, int64_t y_stride, int64_t r0,
                          int64_t r1) {
  switch (a.type) {
    case DType::F32:
      return batch::RowsTokens<batch::F32Row>(a, n, y_stride, r0, r1);
    case DType::F16:
      return batch::RowsTokens<batch::F16Row>(a, n, y_stride, r0, r1);
    case DType::BF16:
      return batch::RowsTokens<batch::BF16Row>(a, n, y_stride, r0, r1);
    default:
      HWY_ABORT("matvec_rows_float_batch: type %u", unsigned(a.type));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kernels {
HWY_EXPORT(MatvecRowsFloatBatch);

void matvec_rows_float_batch(const MatvecArgs& a, int64_t n, int64_t y_stride, int64_t r0,
                             int64_t r1) {
  HWY_DYNAMIC_DISPATCH(MatvecRowsFloatBatch)(a, n, y_stride, r0, r1);
}
}  // namespace tkv::kernels
#endif  // HWY_ONCE
