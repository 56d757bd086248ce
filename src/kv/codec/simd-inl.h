// Highway helpers shared by the codec kernels (per-target header: included
// once per target through foreach_target, hence the toggle guard).
#if defined(TKV_KV_CODEC_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TKV_KV_CODEC_SIMD_INL_H_
#undef TKV_KV_CODEC_SIMD_INL_H_
#else
#define TKV_KV_CODEC_SIMD_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tkv::kv::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Calls fn(tag) with the widest float tag whose lane count divides `dim`, so
// that a head vector is a whole number of vectors (head_dim 8 on AVX-512 uses
// 8-lane vectors instead of a masked tail).
template <class Fn>
HWY_INLINE void WithTagDividing(size_t dim, const Fn& fn) {
  const hn::ScalableTag<float> dfull;
  const hn::CappedTag<float, 8> d8;
  const hn::CappedTag<float, 4> d4;
  const hn::CappedTag<float, 1> d1;
  if (dim % hn::Lanes(dfull) == 0) return fn(dfull);
  if (dim % hn::Lanes(d8) == 0) return fn(d8);
  if (dim % hn::Lanes(d4) == 0) return fn(d4);
  return fn(d1);
}

#if HWY_TARGET == HWY_SCALAR
// One lane per vector: the sums are the lanes themselves.
template <class D, class V = hn::Vec<D>>
HWY_INLINE void Reduce4(D, V a0, V a1, V a2, V a3, float* HWY_RESTRICT out) {
  out[0] = hn::GetLane(a0);
  out[1] = hn::GetLane(a1);
  out[2] = hn::GetLane(a2);
  out[3] = hn::GetLane(a3);
}
#else
// Adds the 128-bit blocks of v together: 4 lanes.
template <class D>
HWY_INLINE hn::Vec<hn::CappedTag<float, 4>> SumBlocks(D d, hn::Vec<D> v) {
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    return SumBlocks(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  } else {
    (void)d;
    return v;
  }
}

// out[j] = sum of the lanes of a_j, four horizontal sums for the price of
// about one (two interleave rounds, then the blocks are added).
template <class D, class V = hn::Vec<D>>
HWY_INLINE void Reduce4(D d, V a0, V a1, V a2, V a3, float* HWY_RESTRICT out) {
  static_assert(hn::MaxLanes(D()) >= 4, "Reduce4 needs at least 4 lanes");
  const hn::Repartition<uint64_t, D> du64;
  const V t0 = hn::Add(hn::InterleaveLower(d, a0, a1), hn::InterleaveUpper(d, a0, a1));
  const V t1 = hn::Add(hn::InterleaveLower(d, a2, a3), hn::InterleaveUpper(d, a2, a3));
  const auto w0 = hn::BitCast(du64, t0), w1 = hn::BitCast(du64, t1);
  const V u = hn::Add(hn::BitCast(d, hn::InterleaveLower(du64, w0, w1)),
                      hn::BitCast(d, hn::InterleaveUpper(du64, w0, w1)));
  hn::StoreU(SumBlocks(d, u), hn::CappedTag<float, 4>(), out);
}
#endif  // HWY_TARGET == HWY_SCALAR

// Calls f(std::integral_constant<int, I>) for I = 0..N-1, unrolled at
// compile time (code positions in a word become immediate shifts and
// constant offsets).
template <class F, int... I>
HWY_INLINE void UnrollImpl(F& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>()), ...);
}
template <int N, class F>
HWY_INLINE void Unroll(F&& f) {
  UnrollImpl(f, std::make_integer_sequence<int, N>());
}

// Register blocks of the prefill kernels: the accumulators of a block stay
// in registers while the keys stream by, so a block's size follows the
// target's vector register count (16 below AVX-512).
#if HWY_TARGET <= HWY_AVX3
inline constexpr int kVectorRegisters = 32;
#else
inline constexpr int kVectorRegisters = 16;
#endif

// acc[r * acc_stride + m * N] += sum_{t < n} w[r * w_stride + t] * x[t * x_stride + m * N]
// for R rows and MB vectors of coordinates: R x MB accumulators in registers,
// each summing its tokens in order (the same result as one token at a time).
// x is f32: callers convert or decode a block of tokens once and run every
// row block over it.
template <int R, int MB, class D>
HWY_INLINE void AccumulateRowBlock(D d, const float* HWY_RESTRICT w, size_t w_stride,
                                   const float* HWY_RESTRICT x, size_t x_stride, int n,
                                   float* HWY_RESTRICT acc, size_t acc_stride) {
  using V = hn::Vec<D>;
  const size_t N = hn::Lanes(d);
  V a[R][MB];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int m = 0; m < MB; ++m) a[r][m] = hn::LoadU(d, acc + size_t(r) * acc_stride + m * N);
  for (int t = 0; t < n; ++t) {
    const float* xt = x + size_t(t) * x_stride;
    V xv[MB];
#pragma GCC unroll 16
    for (int m = 0; m < MB; ++m) xv[m] = hn::LoadU(d, xt + m * N);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const V wr = hn::Set(d, w[size_t(r) * w_stride + t]);
#pragma GCC unroll 16
      for (int m = 0; m < MB; ++m) a[r][m] = hn::MulAdd(wr, xv[m], a[r][m]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int m = 0; m < MB; ++m) hn::StoreU(a[r][m], d, acc + size_t(r) * acc_stride + m * N);
}

// AccumulateRowBlock over G rows: blocks of as many rows as the registers
// allow (MB vectors each), then smaller ones for the rest.
template <int MB, class D>
HWY_INLINE void AccumulateRows(D d, const float* HWY_RESTRICT w, int G, size_t w_stride,
                               const float* HWY_RESTRICT x, size_t x_stride, int n,
                               float* HWY_RESTRICT acc, size_t acc_stride) {
  // R x MB accumulators, MB token vectors and the broadcast weight.
  constexpr int kR = (kVectorRegisters - MB - 1) / MB < 8 ? (kVectorRegisters - MB - 1) / MB : 8;
  int g = 0;
  for (; g + kR <= G; g += kR)
    AccumulateRowBlock<kR, MB>(d, w + size_t(g) * w_stride, w_stride, x, x_stride, n,
                               acc + size_t(g) * acc_stride, acc_stride);
  for (; g + 4 <= G; g += 4)
    AccumulateRowBlock<4, MB>(d, w + size_t(g) * w_stride, w_stride, x, x_stride, n,
                              acc + size_t(g) * acc_stride, acc_stride);
  for (; g + 2 <= G; g += 2)
    AccumulateRowBlock<2, MB>(d, w + size_t(g) * w_stride, w_stride, x, x_stride, n,
                              acc + size_t(g) * acc_stride, acc_stride);
  for (; g < G; ++g)
    AccumulateRowBlock<1, MB>(d, w + size_t(g) * w_stride, w_stride, x, x_stride, n,
                              acc + size_t(g) * acc_stride, acc_stride);
}

// Scores of R query rows (q: R x dim) against 16 tokens held in lanes
// (kt[i * 16 + t] = coordinate i of token t, f32): R x 16 / N accumulators,
// per coordinate one load of the 16 tokens' values and one broadcast of each
// row's q[i], sums in coordinate order. Times nf[t] unless nf is null;
// s[r * stride + t] written for t in [lo, hi).
inline constexpr int kTokenLanes = 16;

template <int R, class D>
HWY_INLINE void ScoreTokenLanes(D df, const float* HWY_RESTRICT q, int dim,
                                const float* HWY_RESTRICT ct, const float* HWY_RESTRICT nf,
                                float* HWY_RESTRICT s, size_t stride, int lo, int hi) {
  using V = hn::Vec<D>;
  constexpr int kG = kTokenLanes / hn::MaxLanes(D());
  const size_t N = hn::Lanes(df);
  V a[R][kG];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int k = 0; k < kG; ++k) a[r][k] = hn::Zero(df);
  for (int i = 0; i < dim; ++i) {
    V c[kG];
#pragma GCC unroll 4
    for (int k = 0; k < kG; ++k) c[k] = hn::Load(df, ct + size_t(i) * kTokenLanes + k * N);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const V qr = hn::Set(df, q[size_t(r) * dim + i]);
#pragma GCC unroll 4
      for (int k = 0; k < kG; ++k) a[r][k] = hn::MulAdd(qr, c[k], a[r][k]);
    }
  }
  const bool full = lo == 0 && hi == kTokenLanes;
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float* sr = s + size_t(r) * stride;
    if (full) {
#pragma GCC unroll 4
      for (int k = 0; k < kG; ++k)
        hn::StoreU((nf ? hn::Mul(a[r][k], hn::Load(df, nf + k * N)) : a[r][k]), df, sr + k * N);
    } else {
      HWY_ALIGN float buf[kTokenLanes];
#pragma GCC unroll 4
      for (int k = 0; k < kG; ++k)
        hn::Store((nf ? hn::Mul(a[r][k], hn::Load(df, nf + k * N)) : a[r][k]), df, buf + k * N);
      for (int l = lo; l < hi; ++l) sr[l] = buf[l];
    }
  }
}

// A 16-entry float codebook and its lookup by the low 4 bits of each u32
// lane (higher bits are ignored, so codes can be used straight after a
// shift; codebooks of fewer entries are replicated to 16 by the caller).
// One permute on AVX-512, two permutes and a blend on AVX2, a gather on the
// narrow targets. kEntries <= 8 (tq1..tq3): the replicated table's two
// halves are equal, so AVX2 needs only the one permute of the low half --
// the same value, a third of the work (the value kernels run one lookup
// per token and 8 coordinates).
template <class D, int kEntries = 16>
class Codebook16 {
 public:
  using V = hn::Vec<D>;
  using DU = hn::RebindToUnsigned<D>;
  using VU = hn::Vec<DU>;

  Codebook16(D d, const float* HWY_RESTRICT table16)
      : table_(table16), lo_(hn::Zero(d)), hi_(hn::Zero(d)) {
    if constexpr (kPermute16) {
      lo_ = hn::LoadU(d, table16);
    } else if constexpr (kPermute8x2) {
      lo_ = hn::LoadU(d, table16);
      hi_ = hn::LoadU(d, table16 + 8);
    }
  }

  HWY_INLINE V operator()(VU idx) const {
#if HWY_TARGET <= HWY_AVX3
    if constexpr (kPermute16) {
      return V{_mm512_permutexvar_ps(idx.raw, lo_.raw)};
    } else if constexpr (kPermute8x2) {
      return V{_mm256_permutex2var_ps(lo_.raw, idx.raw, hi_.raw)};
    }
#elif HWY_TARGET == HWY_AVX2
    if constexpr (kPermute8x2 && kEntries <= 8) {
      return V{_mm256_permutevar8x32_ps(lo_.raw, idx.raw)};
    } else if constexpr (kPermute8x2) {
      const __m256 a = _mm256_permutevar8x32_ps(lo_.raw, idx.raw);
      const __m256 b = _mm256_permutevar8x32_ps(hi_.raw, idx.raw);
      return V{_mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(idx.raw, 28)))};
    }
#endif
    const D d;
    const hn::RebindToSigned<D> di;
    return hn::GatherIndex(d, table_, hn::BitCast(di, hn::And(idx, hn::Set(DU(), 15u))));
  }

 private:
#if HWY_TARGET <= HWY_AVX3
  static constexpr bool kPermute16 = hn::MaxLanes(D()) == 16;
  static constexpr bool kPermute8x2 = hn::MaxLanes(D()) == 8;
#elif HWY_TARGET == HWY_AVX2
  static constexpr bool kPermute16 = false;
  static constexpr bool kPermute8x2 = hn::MaxLanes(D()) == 8;
#else
  static constexpr bool kPermute16 = false;
  static constexpr bool kPermute8x2 = false;
#endif
  static_assert(kEntries >= 1 && kEntries <= 16 && 16 % kEntries == 0);
  const float* table_;
  V lo_, hi_;
};

}  // namespace tkv::kv::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TKV_KV_CODEC_SIMD_INL_H_
