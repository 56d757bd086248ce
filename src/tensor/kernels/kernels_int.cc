// Integer-dot matvec rows for the quantized types that have an integer
// kernel (act_format != kNone): the row groups around the block kernels of
// intdot-inl.h (the activations are quantized by act_quant_simd.cc). Products of several tokens
// run the tiles of kernels_intgemm.cc, whose (row, token) outputs are the
// same bits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/kernels_int.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "tensor/kernels/intdot-inl.h"
#include "tensor/kernels/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

// Rows walked side by side when a product has one token (matvec): several
// sequential weight streams keep more memory requests in flight per core.
inline constexpr int kIntRowGroup = 4;

// R rows from r times one token t, whole rows (matvec).
template <DType T, int R, bool kVnni>
HWY_INLINE void MatvecTile(const kernels::IntDotArgs& a, size_t nb, int64_t r, int64_t t) {
  const uint8_t* rows[R];
  for (int i = 0; i < R; ++i) rows[i] = a.w + size_t(r + i) * a.row_bytes;
  const void* xs[1] = {a.xq + size_t(t) * a.xq_stride};
  IntAcc st[R] = {};
  if constexpr (kVnni && kDotOffset<T> != 0)
    DotRowsOffset<T, R>(rows, 0, nb, static_cast<const kernels::ActBlock32*>(xs[0]), st);
  else
    DotRowsInt<T, R, 1, kVnni>(rows, 0, nb, xs, nullptr, nullptr, st);
  for (int i = 0; i < R; ++i) a.y[t * a.y_stride + r + i] = FinishInt<T>(st[i]);
}

template <DType T, bool kVnni>
void MatvecRows(const kernels::IntDotArgs& a, int64_t r0, int64_t r1) {
  const size_t nb = size_t(a.cols) / (IntGemmTraits<T>::kSuper ? 256 : 32);
  for (int64_t t = 0; t < a.n; ++t) {
    int64_t r = r0;
    for (; r + kIntRowGroup <= r1; r += kIntRowGroup)
      MatvecTile<T, kIntRowGroup, kVnni>(a, nb, r, t);
    for (; r < r1; ++r) MatvecTile<T, 1, kVnni>(a, nb, r, t);
  }
}

// One token at a time (matvec; several tokens go to kernels_intgemm.cc).
template <DType T>
void IntRows(const kernels::IntDotArgs& a, int64_t r0, int64_t r1) {
  if constexpr (kIntHasDotInstructions)
    if (IntVnniUsable()) return MatvecRows<T, true>(a, r0, r1);
  MatvecRows<T, false>(a, r0, r1);
}

// Whether this target has SIMD integer kernels (else the portable scalar
// version runs, correct but slower than the float path's SIMD decoders).
bool IntKernelsNative() {
  return HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2;
}

void IntDotRows(const kernels::IntDotArgs& a, int64_t r0, int64_t r1) {
  switch (a.type) {
    case DType::Q8_0:
      return IntRows<DType::Q8_0>(a, r0, r1);
    case DType::Q4_0:
      return IntRows<DType::Q4_0>(a, r0, r1);
    case DType::Q4_1:
      return IntRows<DType::Q4_1>(a, r0, r1);
    case DType::IQ4_NL:
      return IntRows<DType::IQ4_NL>(a, r0, r1);
    case DType::MXFP4:
      return IntRows<DType::MXFP4>(a, r0, r1);
    case DType::Q5_0:
      return IntRows<DType::Q5_0>(a, r0, r1);
    case DType::Q5_1:
      return IntRows<DType::Q5_1>(a, r0, r1);
    case DType::Q2_K:
      return IntRows<DType::Q2_K>(a, r0, r1);
    case DType::Q3_K:
      return IntRows<DType::Q3_K>(a, r0, r1);
    case DType::Q4_K:
      return IntRows<DType::Q4_K>(a, r0, r1);
    case DType::Q5_K:
      return IntRows<DType::Q5_K>(a, r0, r1);
    case DType::IQ4_XS:
      return IntRows<DType::IQ4_XS>(a, r0, r1);
    case DType::Q6_K:
      return IntRows<DType::Q6_K>(a, r0, r1);
    default:
      HWY_ABORT("int_dot_rows: type %u", unsigned(a.type));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kernels {
HWY_EXPORT(IntDotRows);
HWY_EXPORT(IntKernelsNative);

bool int_kernels_native() {
  return HWY_DYNAMIC_DISPATCH(IntKernelsNative)();
}

void int_dot_rows(const IntDotArgs& a, int64_t r0, int64_t r1) {
  HWY_DYNAMIC_DISPATCH(IntDotRows)(a, r0, r1);
}
}  // namespace tkv::kernels
#endif  // HWY_ONCE
