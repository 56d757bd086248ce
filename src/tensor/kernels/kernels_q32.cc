// Highway kernels for the 32-value block types: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0
// IQ4_NL MXFP4 (matvec rows and dequantization; matmul is in gemm.cc).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/kernels_q32.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "tensor/kernels/rowdot-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

void MatvecRowsQ32(const kernels::MatvecArgs& a, int64_t r0, int64_t r1) {
  switch (a.type) {
    case DType::Q4_0:
      return MatvecRowsQ<DType::Q4_0>(a, r0, r1);
    case DType::Q4_1:
      return MatvecRowsQ<DType::Q4_1>(a, r0, r1);
    case DType::Q5_0:
      return MatvecRowsQ<DType::Q5_0>(a, r0, r1);
    case DType::Q5_1:
      return MatvecRowsQ<DType::Q5_1>(a, r0, r1);
    case DType::Q8_0:
      return MatvecRowsQ<DType::Q8_0>(a, r0, r1);
    case DType::IQ4_NL:
      return MatvecRowsQ<DType::IQ4_NL>(a, r0, r1);
    case DType::MXFP4:
      return MatvecRowsQ<DType::MXFP4>(a, r0, r1);
    default:
      HWY_ABORT("matvec_rows_q32: type %u", unsigned(a.type));
  }
}

void DequantizeQ32(DType type, const uint8_t* src, float* dst, int64_t n) {
  switch (type) {
    case DType::Q4_0:
      return DequantizeQ<DType::Q4_0>(src, dst, n);
    case DType::Q4_1:
      return DequantizeQ<DType::Q4_1>(src, dst, n);
    case DType::Q5_0:
      return DequantizeQ<DType::Q5_0>(src, dst, n);
    case DType::Q5_1:
      return DequantizeQ<DType::Q5_1>(src, dst, n);
    case DType::Q8_0:
      return DequantizeQ<DType::Q8_0>(src, dst, n);
    case DType::IQ4_NL:
      return DequantizeQ<DType::IQ4_NL>(src, dst, n);
    case DType::MXFP4:
      return DequantizeQ<DType::MXFP4>(src, dst, n);
    default:
      HWY_ABORT("dequantize_q32: type %u", unsigned(type));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kernels {
HWY_EXPORT(MatvecRowsQ32);
HWY_EXPORT(DequantizeQ32);

void matvec_rows_q32(const MatvecArgs& a, int64_t r0, int64_t r1) {
  HWY_DYNAMIC_DISPATCH(MatvecRowsQ32)(a, r0, r1);
}
void dequantize_q32(DType type, const uint8_t* src, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(DequantizeQ32)(type, src, dst, n);
}
}  // namespace tkv::kernels
#endif  // HWY_ONCE
