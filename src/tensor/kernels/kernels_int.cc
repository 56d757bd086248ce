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
