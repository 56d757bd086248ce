// Prefill GEMM of BF16 weights with AVX512-BF16's vdpbf16ps (gemm_bf16.cc).
// Highway 1.0.3 has neither the op nor a target for it, so the kernel is
// written with intrinsics in functions compiled for avx512bf16 and reached
// from gemm.cc's AVX-512 targets' code where the CPU has the feature.
//
// Numerics (the scalar statement is round_to_bf16 / the bound in
// tensor/reference.h): every activation is rounded to bf16 (round to
// nearest even, subnormals to zero), so the products w_k * bf16(x_k) are
// exact in f32; vdpbf16ps adds them pairwise into f32 lanes (subnormal
// inputs and results flushed to zero). Per output, per 256-column chunk, a
// fresh chain of pair adds, then the chunk's sum is added to the output: a
// (row, token) result does not depend on n, the tiling or the thread split.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/thread_pool.h"

namespace tkv::kernels {

// y[i * rows + r] = <row r of w (bf16), bf16(x_i)> for i in [0, n). Only
// where cpu_has_avx512_bf16() (aborts elsewhere).
void matmul_bf16_dot(const uint8_t* w, size_t row_bytes, int64_t rows, int64_t cols, const float* x,
                     int64_t n, float* y, ThreadPool& pool);

}  // namespace tkv::kernels
