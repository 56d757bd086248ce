// Fused attention kernels of the row-major f32 / f16 codecs. f16 is the
// baseline every compressed codec is compared with, so these must run at
// memory speed: one pass over the page per call serves all G query heads
// (keys: G dot products per row, four horizontal sums folded into one
// Reduce4; values: G x 4 vector accumulators held in registers while the
// rows stream by).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/f16.h"
#include "kv/codec/kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kv/codec/float_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kv/codec/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tkv::kv::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace simd = tkv::kv::simd::HWY_NAMESPACE;

template <class D>
HWY_INLINE hn::Vec<D> LoadRow(D d, const float* HWY_RESTRICT p) {
  return hn::LoadU(d, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadRow(D d, const uint16_t* HWY_RESTRICT p) {
  const hn::Rebind<hwy::float16_t, D> dh;
  return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
}

template <class D, typename T>
HWY_INLINE void ScoreRowsTag(D df, const float* HWY_RESTRICT q, int G, int dim,
                             const T* HWY_RESTRICT rows, int n, float* HWY_RESTRICT scores,
                             size_t stride) {
  using V = hn::Vec<D>;
  const size_t N = hn::Lanes(df);
  const size_t nv = size_t(dim) / N;
  int g = 0;
  if constexpr (hn::MaxLanes(D()) >= 4) {
    for (; g + 4 <= G; g += 4) {
      const float* q0 = q + size_t(g) * dim;
      const float* q1 = q0 + dim;
      const float* q2 = q1 + dim;
      const float* q3 = q2 + dim;
      float* s = scores + size_t(g) * stride;
      for (int t = 0; t < n; ++t) {
        const T* row = rows + size_t(t) * dim;
        V a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
        for (size_t c = 0; c < nv; ++c) {
          const V k = LoadRow(df, row + c * N);
          a0 = hn::MulAdd(hn::LoadU(df, q0 + c * N), k, a0);
          a1 = hn::MulAdd(hn::LoadU(df, q1 + c * N), k, a1);
          a2 = hn::MulAdd(hn::LoadU(df, q2 + c * N), k, a2);
          a3 = hn::MulAdd(hn::LoadU(df, q3 + c * N), k, a3);
        }
        HWY_ALIGN float r[4];
        simd::Reduce4(df, a0, a1, a2, a3, r);
        s[t] = r[0];
        s[stride + t] = r[1];
        s[2 * stride + t] = r[2];
        s[3 * stride + t] = r[3];
      }
    }
  }
  for (; g < G; ++g) {
    const float* qg = q + size_t(g) * dim;
    float* s = scores + size_t(g) * stride;
    for (int t = 0; t < n; ++t) {
      const T* row = rows + size_t(t) * dim;
      V a = hn::Zero(df);
      for (size_t c = 0; c < nv; ++c)
        a = hn::MulAdd(hn::LoadU(df, qg + c * N), LoadRow(df, row + c * N), a);
      s[t] = hn::GetLane(hn::SumOfLanes(df, a));
    }
  }
}

// Prefill (many query rows per call) on 16-register targets: keys are
// converted to f32 and transposed 16 at a time (tokens in lanes, as the
// TurboQuant tiles are), then scored by blocks of rows
// (simd::ScoreTokenLanes): one load of 16 keys' coordinate and one
// broadcast per row and coordinate, no horizontal sums, each key converted
// once for every row. Each score sums its coordinates in order.
inline constexpr bool kBlockedPrefill = HWY_TARGET == HWY_AVX2;
inline constexpr int kMaxBlockedDim = 256;

template <class D>
HWY_INLINE void ConvertRows(D df, const float* HWY_RESTRICT rows, size_t row_stride, int n,
                            size_t width, float* HWY_RESTRICT out) {
  (void)df;
  for (int t = 0; t < n; ++t)
    for (size_t i = 0; i < width; ++i)
      out[size_t(t) * width + i] = rows[size_t(t) * row_stride + i];
}
template <class D>
HWY_INLINE void ConvertRows(D df, const uint16_t* HWY_RESTRICT rows, size_t row_stride, int n,
                            size_t width, float* HWY_RESTRICT out) {
  const size_t N = hn::Lanes(df);
  for (int t = 0; t < n; ++t)
    for (size_t i = 0; i < width; i += N)
      hn::StoreU(LoadRow(df, rows + size_t(t) * row_stride + i), df, out + size_t(t) * width + i);
}

#if HWY_TARGET != HWY_SCALAR
// out[i * 16 + t] = coordinate i of key t for the nk <= 16 keys at rows
// (zeros for t >= nk): 8 x 8 transposes of 8-lane vectors.
template <class D, typename T>
HWY_INLINE void TransposeKeys(D df, const T* HWY_RESTRICT rows, int nk, int dim,
                              float* HWY_RESTRICT out) {
  static_assert(hn::MaxLanes(D()) == 8, "8 x 8 transposes");
  using V = hn::Vec<D>;
  const hn::Repartition<uint64_t, D> du64;
  constexpr int kL = simd::kTokenLanes;
  const auto il64 = [&](V a, V b) HWY_ATTR {
    return hn::BitCast(df, hn::InterleaveLower(du64, hn::BitCast(du64, a), hn::BitCast(du64, b)));
  };
  const auto iu64 = [&](V a, V b) HWY_ATTR {
    return hn::BitCast(df, hn::InterleaveUpper(du64, hn::BitCast(du64, a), hn::BitCast(du64, b)));
  };
  for (int h = 0; h < kL; h += 8) {
    for (int c = 0; c < dim; c += 8) {
      V r[8];
      for (int j = 0; j < 8; ++j)
        r[j] = h + j < nk ? LoadRow(df, rows + size_t(h + j) * dim + c) : hn::Zero(df);
      V t[8], u[8];
      for (int j = 0; j < 8; j += 2) {
        t[j] = hn::InterleaveLower(df, r[j], r[j + 1]);
        t[j + 1] = hn::InterleaveUpper(df, r[j], r[j + 1]);
      }
      for (int j = 0; j < 8; j += 4) {
        u[j] = il64(t[j], t[j + 2]);
        u[j + 1] = iu64(t[j], t[j + 2]);
        u[j + 2] = il64(t[j + 1], t[j + 3]);
        u[j + 3] = iu64(t[j + 1], t[j + 3]);
      }
      float* o = out + size_t(c) * kL + h;
      for (int j = 0; j < 4; ++j) {
        hn::Store(hn::ConcatLowerLower(df, u[j + 4], u[j]), df, o + j * kL);
        hn::Store(hn::ConcatUpperUpper(df, u[j + 4], u[j]), df, o + (j + 4) * kL);
      }
    }
  }
}

template <class D, typename T>
HWY_INLINE void ScoreRowsBlocked(D df, const float* HWY_RESTRICT q, int G, int dim,
                                 const T* HWY_RESTRICT rows, int n, float* HWY_RESTRICT scores,
                                 size_t stride) {
  constexpr int kL = simd::kTokenLanes;
  // R x 16 / N accumulators, 16 / N key vectors and the broadcast query.
  constexpr int kG = kL / hn::MaxLanes(D());
  constexpr int kR = (simd::kVectorRegisters - kG - 1) / kG;
  HWY_ALIGN float kt[kMaxBlockedDim * kL];
  for (int t0 = 0; t0 < n; t0 += kL) {
    const int nk = std::min(kL, n - t0);
    TransposeKeys(df, rows + size_t(t0) * dim, nk, dim, kt);
    float* s = scores + t0;
    int g = 0;
    for (; g + kR <= G; g += kR)
      simd::ScoreTokenLanes<kR>(df, q + size_t(g) * dim, dim, kt, nullptr, s + size_t(g) * stride,
                                stride, 0, nk);
    for (; g + 4 <= G; g += 4)
      simd::ScoreTokenLanes<4>(df, q + size_t(g) * dim, dim, kt, nullptr, s + size_t(g) * stride,
                               stride, 0, nk);
    for (; g < G; ++g)
      simd::ScoreTokenLanes<1>(df, q + size_t(g) * dim, dim, kt, nullptr, s + size_t(g) * stride,
                               stride, 0, nk);
  }
}
#endif  // HWY_TARGET != HWY_SCALAR

// Values of a prefill call: blocks of MB vectors of coordinates x up to
// kValueTokens tokens converted to f32 once, then every row block
// accumulated over them (simd::AccumulateRows; same sums as AccumulateBlock).
inline constexpr int kValueTokens = 64;

template <class D, typename T>
HWY_INLINE void AccumulateRowsBlocked(D df, const float* HWY_RESTRICT p, int G, size_t stride,
                                      const T* HWY_RESTRICT rows, int n, int dim,
                                      float* HWY_RESTRICT acc) {
  constexpr int kMB = 2;
  const size_t N = hn::Lanes(df);
  HWY_ALIGN float xbuf[kValueTokens * kMB * hn::MaxLanes(D())];
  const auto run = [&](auto mb, size_t c0) HWY_ATTR {
    constexpr int MB = decltype(mb)::value;
    for (int t0 = 0; t0 < n; t0 += kValueTokens) {
      const int nt = std::min(kValueTokens, n - t0);
      const T* src = rows + size_t(t0) * dim + c0;
      if constexpr (std::is_same_v<T, float>) {
        simd::AccumulateRows<MB>(df, p + t0, G, stride, src, size_t(dim), nt, acc + c0,
                                 size_t(dim));
      } else {
        ConvertRows(df, src, size_t(dim), nt, MB * N, xbuf);
        simd::AccumulateRows<MB>(df, p + t0, G, stride, xbuf, MB * N, nt, acc + c0, size_t(dim));
      }
    }
  };
  size_t c0 = 0;
  for (; c0 + kMB * N <= size_t(dim); c0 += kMB * N) run(std::integral_constant<int, kMB>(), c0);
  for (; c0 < size_t(dim); c0 += N) run(std::integral_constant<int, 1>(), c0);
}

// GH query heads x MB vectors of coordinates stay in registers while the
// n rows stream by.
template <int GH, int MB, class D, typename T>
HWY_INLINE void AccumulateBlock(D df, const float* HWY_RESTRICT p, size_t stride,
                                const T* HWY_RESTRICT rows, int n, int dim, size_t c0,
                                float* HWY_RESTRICT acc) {
  using V = hn::Vec<D>;
  const size_t N = hn::Lanes(df);
  V a[GH][MB];
  for (int j = 0; j < GH; ++j)
    for (int m = 0; m < MB; ++m) a[j][m] = hn::LoadU(df, acc + size_t(j) * dim + c0 + m * N);
  for (int t = 0; t < n; ++t) {
    const T* row = rows + size_t(t) * dim + c0;
    V x[MB];
    for (int m = 0; m < MB; ++m) x[m] = LoadRow(df, row + m * N);
    for (int j = 0; j < GH; ++j) {
      const V w = hn::Set(df, p[size_t(j) * stride + t]);
      for (int m = 0; m < MB; ++m) a[j][m] = hn::MulAdd(w, x[m], a[j][m]);
    }
  }
  for (int j = 0; j < GH; ++j)
    for (int m = 0; m < MB; ++m) hn::StoreU(a[j][m], df, acc + size_t(j) * dim + c0 + m * N);
}

template <int GH, class D, typename T>
HWY_INLINE void AccumulateHeads(D df, const float* HWY_RESTRICT p, size_t stride,
                                const T* HWY_RESTRICT rows, int n, int dim,
                                float* HWY_RESTRICT acc) {
  const size_t N = hn::Lanes(df);
  const size_t nv = size_t(dim) / N;
  size_t c = 0;
  for (; c + 4 <= nv; c += 4) AccumulateBlock<GH, 4>(df, p, stride, rows, n, dim, c * N, acc);
  for (; c < nv; ++c) AccumulateBlock<GH, 1>(df, p, stride, rows, n, dim, c * N, acc);
}

template <class D, typename T>
HWY_INLINE void AccumulateRowsTag(D df, const float* HWY_RESTRICT p, int G, size_t stride,
                                  const T* HWY_RESTRICT rows, int n, int dim,
                                  float* HWY_RESTRICT acc) {
  int g = 0;
  for (; g + 4 <= G; g += 4)
    AccumulateHeads<4>(df, p + size_t(g) * stride, stride, rows, n, dim, acc + size_t(g) * dim);
  for (; g < G; ++g)
    AccumulateHeads<1>(df, p + size_t(g) * stride, stride, rows, n, dim, acc + size_t(g) * dim);
}

// f32 -> f16 (round to nearest even, as tkv::f32_to_f16), false if any
// result is Inf or NaN (non-finite input or |x| >= 65520). F16C on AVX2 and
// up; Highway's emulation on narrower targets truncates, so they use the
// scalar conversion: every target writes the same bytes.
bool EncodeF16Row(const float* HWY_RESTRICT x, int n, uint16_t* HWY_RESTRICT out) {
  int i = 0;
  bool ok = true;
#if HWY_TARGET <= HWY_AVX2
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const int N = int(hn::Lanes(df));
  const auto exp_mask = hn::Set(du16, uint16_t(0x7c00));
  auto bad = hn::Zero(du16);
  for (; i + N <= n; i += N) {
    const auto h = hn::BitCast(du16, hn::DemoteTo(dh, hn::LoadU(df, x + i)));
    hn::StoreU(h, du16, out + i);
    bad = hn::Or(bad, hn::VecFromMask(du16, hn::Eq(hn::And(h, exp_mask), exp_mask)));
  }
  ok = hn::AllTrue(du16, hn::Eq(bad, hn::Zero(du16)));
#endif
  for (; i < n; ++i) {
    out[i] = f32_to_f16(x[i]);
    ok = ok && (out[i] & 0x7c00) != 0x7c00;
  }
  return ok;
}

// Decode (a GQA group's few rows) streams the rows once through
// ScoreRowsTag / AccumulateRowsTag; prefill takes the blocked kernels where
// the target has them (values: the same bits; scores: the same sums in
// another order, within float rounding).
template <class D, typename T>
HWY_INLINE void ScoreRowsAny(D df, const float* q, int G, int dim, const T* rows, int n,
                             float* scores, size_t stride) {
#if HWY_TARGET != HWY_SCALAR
  if constexpr (kBlockedPrefill && hn::MaxLanes(D()) == 8) {
    if (G >= 8 && dim <= kMaxBlockedDim)
      return ScoreRowsBlocked(df, q, G, dim, rows, n, scores, stride);
  }
#endif
  ScoreRowsTag(df, q, G, dim, rows, n, scores, stride);
}
template <class D, typename T>
HWY_INLINE void AccumulateRowsAny(D df, const float* p, int G, size_t stride, const T* rows, int n,
                                  int dim, float* acc) {
  if constexpr (kBlockedPrefill) {
    if (G >= 8) return AccumulateRowsBlocked(df, p, G, stride, rows, n, dim, acc);
  }
  AccumulateRowsTag(df, p, G, stride, rows, n, dim, acc);
}

void ScoreRowsF32(const float* q, int G, int dim, const float* rows, int n, float* scores,
                  size_t stride) {
  simd::WithTagDividing(dim,
                        [&](auto df) { ScoreRowsAny(df, q, G, dim, rows, n, scores, stride); });
}
void ScoreRowsF16(const float* q, int G, int dim, const uint16_t* rows, int n, float* scores,
                  size_t stride) {
  simd::WithTagDividing(dim,
                        [&](auto df) { ScoreRowsAny(df, q, G, dim, rows, n, scores, stride); });
}
void AccumulateRowsF32(const float* p, int G, size_t stride, const float* rows, int n, int dim,
                       float* acc) {
  simd::WithTagDividing(dim,
                        [&](auto df) { AccumulateRowsAny(df, p, G, stride, rows, n, dim, acc); });
}
void AccumulateRowsF16(const float* p, int G, size_t stride, const uint16_t* rows, int n, int dim,
                       float* acc) {
  simd::WithTagDividing(dim,
                        [&](auto df) { AccumulateRowsAny(df, p, G, stride, rows, n, dim, acc); });
}

}  // namespace tkv::kv::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kv::kernels {

HWY_EXPORT(EncodeF16Row);
HWY_EXPORT(ScoreRowsF32);
HWY_EXPORT(ScoreRowsF16);
HWY_EXPORT(AccumulateRowsF32);
HWY_EXPORT(AccumulateRowsF16);

bool encode_f16_row(const float* x, int n, uint16_t* out) {
  return HWY_DYNAMIC_DISPATCH(EncodeF16Row)(x, n, out);
}
void score_rows_f32(const float* q, int G, int dim, const float* rows, int n, float* scores,
                    size_t stride) {
  HWY_DYNAMIC_DISPATCH(ScoreRowsF32)(q, G, dim, rows, n, scores, stride);
}
void score_rows_f16(const float* q, int G, int dim, const uint16_t* rows, int n, float* scores,
                    size_t stride) {
  HWY_DYNAMIC_DISPATCH(ScoreRowsF16)(q, G, dim, rows, n, scores, stride);
}
void accumulate_rows_f32(const float* p, int G, size_t stride, const float* rows, int n, int dim,
                         float* acc) {
  HWY_DYNAMIC_DISPATCH(AccumulateRowsF32)(p, G, stride, rows, n, dim, acc);
}
void accumulate_rows_f16(const float* p, int G, size_t stride, const uint16_t* rows, int n, int dim,
                         float* acc) {
  HWY_DYNAMIC_DISPATCH(AccumulateRowsF16)(p, G, stride, rows, n, dim, acc);
}

}  // namespace tkv::kv::kernels
#endif  // HWY_ONCE
