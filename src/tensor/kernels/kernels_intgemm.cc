// Integer-dot products of several tokens (prefill chunks and the batched
// decode of many sequences): token tiles around intdot-inl.h's kernel.
// A (row, token) output is bit-identical to the matvec of that token
// (kernels_int.cc), whatever n, the tiling or the thread split.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/kernels_intgemm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cstring>

#include "hwy/highway.h"
#include "tensor/kernels/cpu_features.h"
#include "tensor/kernels/intdot-inl.h"
#include "tensor/kernels/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

// Tokens sharing one unpacking of a weight block: 8 on x86 (per token only
// the activations and one int32 and one f32 accumulator are in registers).
inline constexpr int kTileTokens = 8;
// Rows whose accumulators (kTileRows x kTileTokens IntAcc, 8 KiB on x86)
// stay on the stack while the columns are walked segment by segment.
inline constexpr int64_t kTileRows = 16;
// Bytes of one column segment of a token tile's activation blocks: they stay
// in L1 while the segment is swept over kTileRows weight rows.
inline constexpr size_t kSegmentActBytes = 16 << 10;

// NT tokens from t times rows [r0, r1): kTileRows rows at a time, their
// columns in segments. Each (row, token) adds its blocks in block order into
// its own accumulators, so the segmentation never changes a value.
template <DType T, int NT, bool kVnni>
void TokenTile(const kernels::IntDotArgs& a, size_t nb, int64_t r0, int64_t r1, int64_t t) {
  const void* xs[NT];
  for (int j = 0; j < NT; ++j) xs[j] = a.xq + size_t(t + j) * a.xq_stride;
  const size_t act_block =
      IntGemmTraits<T>::kSuper ? sizeof(kernels::ActBlock256) : sizeof(kernels::ActBlock32);
  // The tile's activation scales, segment by segment (kTileDx per block).
  constexpr size_t kMaxSegment = 64;
  const size_t segment =
      kIntBlockRanges ? std::clamp<size_t>(kSegmentActBytes / (NT * act_block), 1, kMaxSegment)
                      : nb;  // the portable kernels take whole rows and no scales table
  alignas(32) float dx[kMaxSegment * kTileDx] = {};
  // q4_1 / q5_1: the blocks' sums of q, as floats, laid out like dx.
  alignas(32) float sx[kIntOffset<T> ? kMaxSegment * kTileDx : 1] = {};
  for (int64_t rb = r0; rb < r1; rb += kTileRows) {
    const int64_t re = std::min(r1, rb + kTileRows);
    IntAcc st[kTileRows * NT] = {};
    for (size_t b0 = 0; b0 < nb; b0 += segment) {
      const size_t b1 = std::min(nb, b0 + segment);
      if constexpr (kIntBlockRanges)
        for (size_t b = b0; b < b1; ++b)
          for (int j = 0; j < NT; ++j) {
            float d;  // the first field of both block layouts
            std::memcpy(&d, static_cast<const uint8_t*>(xs[j]) + b * act_block, sizeof(float));
            dx[(b - b0) * kTileDx + size_t(j)] = d;
            if constexpr (kIntOffset<T>)
              sx[(b - b0) * kTileDx + size_t(j)] =
                  float(static_cast<const kernels::ActBlock32*>(xs[j])[b].sum);
          }
      for (int64_t r = rb; r < re; ++r) {
        const uint8_t* row = a.w + size_t(r) * a.row_bytes;
        DotRowsInt<T, 1, NT, kVnni>(&row, b0, b1, xs, dx, sx, st + (r - rb) * NT);
      }
    }
    for (int64_t r = rb; r < re; ++r)
      for (int j = 0; j < NT; ++j)
        a.y[(t + j) * a.y_stride + r] = FinishInt<T>(st[(r - rb) * NT + j]);
  }
}

template <DType T, bool kVnni>
void GemmRows(const kernels::IntDotArgs& a, int64_t r0, int64_t r1) {
  const size_t nb = size_t(a.cols) / (IntGemmTraits<T>::kSuper ? 256 : 32);
  int64_t t = 0;
  for (; t + kTileTokens <= a.n; t += kTileTokens)
    TokenTile<T, kTileTokens, kVnni>(a, nb, r0, r1, t);
  if (a.n - t >= 4) TokenTile<T, 4, kVnni>(a, nb, r0, r1, t), t += 4;
  // The last 1-3 tokens as matvec: with nothing to share per block, its
  // row streams side by side (kIntRowGroup) do better than a tile of one
  // token.
  MatvecRows<T, kVnni>(a, r0, r1, t);
}

template <DType T>
void GemmRowsFor(const kernels::IntDotArgs& a, int64_t r0, int64_t r1) {
  if constexpr (kIntHasDotInstructions)
    if (IntVnniUsable()) return GemmRows<T, true>(a, r0, r1);
  GemmRows<T, false>(a, r0, r1);
}

void IntGemmRows(const kernels::IntDotArgs& a, int64_t r0, int64_t r1) {
  switch (a.type) {
    case DType::Q8_0:
      return GemmRowsFor<DType::Q8_0>(a, r0, r1);
    case DType::Q4_0:
      return GemmRowsFor<DType::Q4_0>(a, r0, r1);
    case DType::Q4_1:
      return GemmRowsFor<DType::Q4_1>(a, r0, r1);
    case DType::IQ4_NL:
      return GemmRowsFor<DType::IQ4_NL>(a, r0, r1);
    case DType::MXFP4:
      return GemmRowsFor<DType::MXFP4>(a, r0, r1);
    case DType::Q5_0:
      return GemmRowsFor<DType::Q5_0>(a, r0, r1);
    case DType::Q5_1:
      return GemmRowsFor<DType::Q5_1>(a, r0, r1);
    case DType::Q2_K:
      return GemmRowsFor<DType::Q2_K>(a, r0, r1);
    case DType::Q3_K:
      return GemmRowsFor<DType::Q3_K>(a, r0, r1);
    case DType::Q4_K:
      return GemmRowsFor<DType::Q4_K>(a, r0, r1);
    case DType::Q5_K:
      return GemmRowsFor<DType::Q5_K>(a, r0, r1);
    case DType::IQ4_XS:
      return GemmRowsFor<DType::IQ4_XS>(a, r0, r1);
    case DType::Q6_K:
      return GemmRowsFor<DType::Q6_K>(a, r0, r1);
    default:
      HWY_ABORT("int_gemm_rows: type %u", unsigned(a.type));
  }
}

bool IntDotVnni() {
  return IntVnniUsable();
}

// Whether these tiles beat the f32 GEMM (gemm.cc) on prefill-sized products
// (n = 512, 2048 x 2048, one core of a Sapphire Rapids; WEIGHTS.md has the
// current figures; the ratios below are from when each choice was made).
// Per 32 values a token costs two integer multiplies (vpmaddubsw and
// vpmaddwd / vpdpwssd) plus, for the 32-value types, the block's float
// scale step, against four 8-lane FMAs on AVX2 and two 16-lane FMAs on
// AVX-512: so the super-block types with cheap unpacking win on AVX2 only,
// and AVX-512's f32 GEMM keeps prefill.
bool IntGemmPreferred(DType type) {
#if HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
  switch (type) {
    case DType::Q4_K:  // gemm_q4k_avx2.cc's tiles, with or without AVX-VNNI
    case DType::Q5_K:  // 1.08x / 1.00x
      return true;
    case DType::Q2_K:    // 1.04x / 0.96x
    case DType::IQ4_XS:  // 1.05x / 0.92x
      return IntVnniUsable();
    case DType::Q6_K:  // gemm_q4k_avx2.cc's tiles
      return true;
    default:
      return false;
  }
#else
  (void)type;
  return false;
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kernels {
HWY_EXPORT(IntGemmRows);
HWY_EXPORT(IntDotVnni);
HWY_EXPORT(IntGemmPreferred);

void int_gemm_rows(const IntDotArgs& a, int64_t r0, int64_t r1) {
  HWY_DYNAMIC_DISPATCH(IntGemmRows)(a, r0, r1);
}

bool int_dot_vnni_active() {
  return HWY_DYNAMIC_DISPATCH(IntDotVnni)();
}

bool int_gemm_preferred(DType type) {
  return HWY_DYNAMIC_DISPATCH(IntGemmPreferred)(type);
}
}  // namespace tkv::kernels
#endif  // HWY_ONCE
