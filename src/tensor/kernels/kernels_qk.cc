// Highway kernels for the 256-value super-block types: Q2_K Q3_K Q4_K Q5_K Q6_K
// IQ4_XS (matvec rows and dequantization; matmul is in gemm.cc).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/kernels_qk.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "tensor/kernels/rowdot-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

void MatvecRowsQK(const kernels::MatvecArgs& a, int64_t r0, int64_t r1) {
  switch (a.type) {
    case DType::Q2_K:
      return MatvecRowsQ<DType::Q2_K>(a, r0, r1);
    case DType::Q3_K:
      return MatvecRowsQ<DType::Q3_K>(a, r0, r1);
    case DType::Q4_K:
      return MatvecRowsQ<DType::Q4_K>(a, r0, r1);
    case DType::Q5_K:
      return MatvecRowsQ<DType::Q5_K>(a, r0, r1);
    case DType::Q6_K:
      return MatvecRowsQ<DType::Q6_K>(a, r0, r1);
    case DType::IQ4_XS:
      return MatvecRowsQ<DType::IQ4_XS>(a, r0, r1);
    default:
      HWY_ABORT("matvec_rows_qk: type %u", unsigned(a.type));
  }
}

void DequantizeQK(DType type, const uint8_t* src, float* dst, int64_t n) {
  switch (type) {
    case DType::Q2_K:
      return DequantizeQ<DType::Q2_K>(src, dst, n);
    case DType::Q3_K:
      return DequantizeQ<DType::Q3_K>(src, dst, n);
    case DType::Q4_K:
      return DequantizeQ<DType::Q4_K>(src, dst, n);
    case DType::Q5_K:
      return DequantizeQ<DType::Q5_K>(src, dst, n);
    case DType::Q6_K:
      return DequantizeQ<DType::Q6_K>(src, dst, n);
    case DType::IQ4_XS:
      return DequantizeQ<DType::IQ4_XS>(src, dst, n);
    default:
      HWY_ABORT("dequantize_qk: type %u", unsigned(type));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kernels {
HWY_EXPORT(MatvecRowsQK);
HWY_EXPORT(DequantizeQK);

void matvec_rows_qk(const MatvecArgs& a, int64_t r0, int64_t r1) {
  HWY_DYNAMIC_DISPATCH(MatvecRowsQK)(a, r0, r1);
}
void dequantize_qk(DType type, const uint8_t* src, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(DequantizeQK)(type, src, dst, n);
}
}  // namespace tkv::kernels
#endif  // HWY_ONCE
