// Fused attention kernels of the row-major f32 / f16 codecs. f16 is the
// baseline every compressed codec is compared with, so these must run at
// memory speed: one pass over the page per call serves all G query heads
// (keys: G dot products per row, four horizontal sums folded into one
// Reduce4; values: G x 4 vector accumulators held in registers while the
// rows stream by).
#include <cstddef>
#include <cstdint>

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

void ScoreRowsF32(const float* q, int G, int dim, const float* rows, int n, float* scores,
                  size_t stride) {
  simd::WithTagDividing(dim,
                        [&](auto df) { ScoreRowsTag(df, q, G, dim, rows, n, scores, stride); });
}
void ScoreRowsF16(const float* q, int G, int dim, const uint16_t* rows, int n, float* scores,
                  size_t stride) {
  simd::WithTagDividing(dim,
                        [&](auto df) { ScoreRowsTag(df, q, G, dim, rows, n, scores, stride); });
}
void AccumulateRowsF32(const float* p, int G, size_t stride, const float* rows, int n, int dim,
                       float* acc) {
  simd::WithTagDividing(dim,
                        [&](auto df) { AccumulateRowsTag(df, p, G, stride, rows, n, dim, acc); });
}
void AccumulateRowsF16(const float* p, int G, size_t stride, const uint16_t* rows, int n, int dim,
                       float* acc) {
  simd::WithTagDividing(dim,
                        [&](auto df) { AccumulateRowsTag(df, p, G, stride, rows, n, dim, acc); });
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
