// Generic matvec and dequantization loops over the block decoders of
// decode-inl.h. Compiled once per SIMD target by each kernel file.
//
// matvec strategy (decode is memory-bound): kRowGroup rows are walked side by
// side, block by block, so each x vector is loaded once per group and the CPU
// sees several independent weight streams; every row keeps two vector
// accumulators (independent FMA chains) for its whole length and is reduced
// horizontally once at the end, never per block. A row's arithmetic does not
// depend on which group or thread it lands in, so results are identical for
// every thread count.
#if defined(TKV_TENSOR_ROWDOT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TKV_TENSOR_ROWDOT_INL_H_
#undef TKV_TENSOR_ROWDOT_INL_H_
#else
#define TKV_TENSOR_ROWDOT_INL_H_
#endif

#include <type_traits>
#include <utility>

#include "hwy/cache_control.h"
#include "tensor/kernels/decode-inl.h"
#include "tensor/kernels/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

// Rows walked together by matvec.
inline constexpr int64_t kRowGroup = 4;
// How far ahead of the current block each row stream is prefetched (bytes).
inline constexpr size_t kPrefetchAhead = 768;

// Calls f(std::integral_constant<int64_t, r>) for r = 0 .. R-1, so that
// per-row accumulator arrays are indexed by constants and stay in registers
// (a runtime row loop around a large block body made GCC keep them on the
// stack, one store and reload per FMA).
template <int64_t R, class F>
HWY_INLINE void ForRows(const F& f) {
  [&]<int64_t... I>(std::integer_sequence<int64_t, I...>) HWY_ATTR {
    (f(std::integral_constant<int64_t, I>()), ...);
  }
  (std::make_integer_sequence<int64_t, R>());
}

template <DType T, int64_t R>
HWY_INLINE void DotRowsQ(const uint8_t* w, size_t row_bytes, size_t n_blocks, const float* x,
                         float* y) {
  using Dec = Decoder<T>;
  using Block = typename Dec::Block;
  constexpr size_t kValues = Block::kValues, kBytes = sizeof(Block);
  const DF df;
  VF acc0[R], acc1[R];
  for (int64_t r = 0; r < R; ++r) acc0[r] = acc1[r] = hn::Zero(df);
  // One prefetch per cache line of each row, not one per (small) block.
  constexpr size_t kPrefetchEvery = kBytes >= 64 ? 1 : 64 / kBytes;
  for (size_t b = 0; b < n_blocks; ++b) {
    const float* xb = x + b * kValues;
    ForRows<R>([&](auto r) HWY_ATTR {
      const uint8_t* blk = w + size_t(r) * row_bytes + b * kBytes;
      if (b % kPrefetchEvery == 0) hwy::Prefetch(blk + kPrefetchAhead);
      Dec::Decode(blk, [&](size_t i, VF wv) HWY_ATTR {
        const VF xv = hn::LoadU(df, xb + i * kLanes);
        if (i & 1) {
          acc1[r] = hn::MulAdd(wv, xv, acc1[r]);
        } else {
          acc0[r] = hn::MulAdd(wv, xv, acc0[r]);
        }
      });
    });
  }
  for (int64_t r = 0; r < R; ++r) y[r] = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0[r], acc1[r])));
}

template <DType T>
void MatvecRowsQ(const kernels::MatvecArgs& a, int64_t r0, int64_t r1) {
  const size_t n_blocks = size_t(a.cols) / Decoder<T>::Block::kValues;
  int64_t r = r0;
  for (; r + kRowGroup <= r1; r += kRowGroup)
    DotRowsQ<T, kRowGroup>(a.w + size_t(r) * a.row_bytes, a.row_bytes, n_blocks, a.x, a.y + r);
  for (; r < r1; ++r)
    DotRowsQ<T, 1>(a.w + size_t(r) * a.row_bytes, a.row_bytes, n_blocks, a.x, a.y + r);
}

template <DType T>
void DequantizeQ(const uint8_t* src, float* dst, int64_t n) {
  using Block = typename Decoder<T>::Block;
  const DF df;
  for (int64_t b = 0; b < n / Block::kValues; ++b) {
    float* out = dst + b * Block::kValues;
    Decoder<T>::Decode(src + size_t(b) * sizeof(Block),
                       [&](size_t i, VF wv) HWY_ATTR { hn::StoreU(wv, df, out + i * kLanes); });
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#endif  // TKV_TENSOR_ROWDOT_INL_H_
