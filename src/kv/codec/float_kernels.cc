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

// Prefill (many query rows per call) on 16-register targets: a block of KB
// keys is converted to f32 once and scored against every row, 4 rows x KB
// keys at a time (4 x KB independent FMA chains sharing each load, where one
// key at a time leaves the FMAs waiting on their 4 chains' latency). Each
// score is summed exactly as ScoreRowsTag sums it: lane partials in
// coordinate order, then Reduce4 (rows beyond a multiple of 4: SumOfLanes).
inline constexpr bool kBlockedPrefill = HWY_TARGET == HWY_AVX2;
inline constexpr int kScoreKeys = 3;  // keys per block: 12 accumulators, 3 keys, 1 query
inline constexpr int kMaxBlockedDim = 256;

template <int KB, class D>
HWY_INLINE void ScoreKeyBlock(D df, const float* HWY_RESTRICT q, int G, int dim,
                              const float* HWY_RESTRICT k, size_t k_stride, float* HWY_RESTRICT s,
                              size_t stride) {
  using V = hn::Vec<D>;
  const size_t N = hn::Lanes(df);
  const size_t nv = size_t(dim) / N;
  int g = 0;
  for (; g + 4 <= G; g += 4) {
    const float* q0 = q + size_t(g) * dim;
    V a[4][KB];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < KB; ++j) a[r][j] = hn::Zero(df);
    for (size_t c = 0; c < nv; ++c) {
      V kv[KB];
#pragma GCC unroll 4
      for (int j = 0; j < KB; ++j) kv[j] = hn::LoadU(df, k + j * k_stride + c * N);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const V qv = hn::LoadU(df, q0 + size_t(r) * dim + c * N);
#pragma GCC unroll 4
        for (int j = 0; j < KB; ++j) a[r][j] = hn::MulAdd(qv, kv[j], a[r][j]);
      }
    }
#pragma GCC unroll 4
    for (int j = 0; j < KB; ++j) {
      HWY_ALIGN float r4[4];
      simd::Reduce4(df, a[0][j], a[1][j], a[2][j], a[3][j], r4);
      float* sj = s + size_t(g) * stride + j;
      sj[0] = r4[0];
      sj[stride] = r4[1];
      sj[2 * stride] = r4[2];
      sj[3 * stride] = r4[3];
    }
  }
  for (; g < G; ++g) {
    const float* qg = q + size_t(g) * dim;
    for (int j = 0; j < KB; ++j) {
      V a = hn::Zero(df);
      for (size_t c = 0; c < nv; ++c)
        a = hn::MulAdd(hn::LoadU(df, qg + c * N), hn::LoadU(df, k + j * k_stride + c * N), a);
      s[size_t(g) * stride + j] = hn::GetLane(hn::SumOfLanes(df, a));
    }
  }
}

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

template <class D, typename T>
HWY_INLINE void ScoreRowsBlocked(D df, const float* HWY_RESTRICT q, int G, int dim,
                                 const T* HWY_RESTRICT rows, int n, float* HWY_RESTRICT scores,
                                 size_t stride) {
  HWY_ALIGN float kbuf[kScoreKeys * kMaxBlockedDim];
  const auto keys = [&](int t, int kb) -> const float* {
    if constexpr (std::is_same_v<T, float>) {
      (void)kb;
      return rows + size_t(t) * dim;
    } else {
      ConvertRows(df, rows + size_t(t) * dim, size_t(dim), kb, size_t(dim), kbuf);
      return kbuf;
    }
  };
  int t = 0;
  for (; t + kScoreKeys <= n; t += kScoreKeys)
    ScoreKeyBlock<kScoreKeys>(df, q, G, dim, keys(t, kScoreKeys), size_t(dim), scores + t, stride);
  for (; t < n; ++t) ScoreKeyBlock<1>(df, q, G, dim, keys(t, 1), size_t(dim), scores + t, stride);
}

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
// the target has them. Both give the same bits.
template <class D, typename T>
HWY_INLINE void ScoreRowsAny(D df, const float* q, int G, int dim, const T* rows, int n,
                             float* scores, size_t stride) {
  if constexpr (kBlockedPrefill && hn::MaxLanes(D()) >= 4) {
    if (G >= 8 && dim <= kMaxBlockedDim)
      return ScoreRowsBlocked(df, q, G, dim, rows, n, scores, stride);
  }
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
