// Prefill GEMM of F16 and BF16 weights with Intel AMX (gemm_amx.cc):
// tdpbf16ps multiplies 16 x 32 bf16 tiles into 16 x 16 f32 tiles, several
// times the f32 FMA GEMM's multiply-add rate. Highway 1.0.3 has no AMX, so
// the kernel is written with intrinsics in functions compiled for
// amx-tile / amx-bf16 and reached from gemm.cc's AVX-512 targets' code
// where cpu_has_amx_bf16() and the kernel configuration's amx (kernel_config.h).
//
// Numerics (the scalar statement and its bound: amx_gemm_relative_bound in
// tensor/reference.h): products of bf16 pieces, exact in f32. A weight w
// splits exactly into w_hi = bf16(w) and w_lo = w - w_hi (F16's 11-bit
// significand is two bf16 ones; BF16 weights are w_hi alone), an activation
// x into x_1 = bf16(x), x_2 = bf16(x - x_1), x_3 = bf16(x - x_1 - x_2)
// (round to nearest even). Per output the terms w_hi x_1, w_hi x_2,
// w_hi x_3, w_lo x_1, w_lo x_2 of every column (F16; BF16: the first three)
// are added into one f32 chain in a fixed column order (tdpbf16ps: pairs of
// columns, subnormal inputs and results flushed to zero); only w_lo x_3
// (|.| <= 2^-8 * 2^-16 |w x|) is left out. A (row, token) result does not depend
// on n, the tiling or the thread split.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/thread_pool.h"
#include "tensor/dtype.h"

namespace tkv::kernels {

// y[i * rows + r] = <row r of w, x_i> for i in [0, n), type F16 or BF16;
// row_blocks: F16 in row blocks (tensor/matmul.h, rows a multiple of 16),
// the same bits as on the rows. Only where cpu_has_amx_bf16() (aborts
// elsewhere).
void matmul_amx(DType type, const uint8_t* w, size_t row_bytes, int64_t rows, int64_t cols,
                const float* x, int64_t n, float* y, ThreadPool& pool, bool row_blocks = false);

// Whether matmul_panels (kernels.h) runs F16 and BF16 weights through
// matmul_amx on the active target: AVX3 or AVX3_DL where cpu_has_amx_bf16()
// and kernel_config().amx; TURBOKV_SIMD=avx2 turns it off (gemm.cc).
bool amx_gemm_active();

}  // namespace tkv::kernels
