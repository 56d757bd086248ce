// Q4_K and Q6_K integer-dot products of prefill-sized token counts on AVX2
// (gemm_q4k_avx2.cc; no dot-product instructions, so with or without
// AVX-VNNI): every (row, token) bit-identical to int_dot_rows.
#ifndef TKV_TENSOR_KERNELS_GEMM_Q4K_AVX2_H_
#define TKV_TENSOR_KERNELS_GEMM_Q4K_AVX2_H_

#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/kernels/kernels.h"

namespace tkv::kernels {

// Whether int_product should take q4k_gemm_rows for n tokens of `type` on
// the active target: Q4_K and Q6_K on AVX2 (with or without AVX-VNNI),
// above kIntMatmulMaxTokens tokens. Either kernel gives the same bits.
bool q4k_gemm_active(DType type, int64_t n);

// Rows [r0, r1) of a Q4_K or Q6_K product of a.n >= 1 tokens; the same
// contract as int_gemm_rows. Only where q4k_gemm_active(a.type, a.n).
void q4k_gemm_rows(const IntDotArgs& a, int64_t r0, int64_t r1);

}  // namespace tkv::kernels

#endif  // TKV_TENSOR_KERNELS_GEMM_Q4K_AVX2_H_
