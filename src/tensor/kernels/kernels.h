// Internal entry points of the Highway kernel files (tensor/kernels/*.cc).
// Each function dispatches at run time to the best SIMD target the CPU has
// (or the one hwy::SetSupportedTargetsForTest forces). The public API in
// tensor/matmul.h validates arguments and splits the work over threads; these
// functions trust their arguments.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/thread_pool.h"
#include "tensor/dtype.h"

namespace tkv::kernels {

// Which kernel file handles a type.
enum class Family { kFloat, kQ32, kQK, kNone };
Family family_of(DType type);

// Rows [r0, r1) of a matvec: y[r] = <row r of w, x>. Each row's result is
// computed by the same instruction sequence whatever r0/r1 are, so splitting
// rows over threads never changes a value.
struct MatvecArgs {
  DType type;
  const uint8_t* w;  // row 0
  size_t row_bytes;
  int64_t cols;
  const float* x;
  float* y;
};
void matvec_rows_float(const MatvecArgs& a, int64_t r0, int64_t r1);  // F32 F16 BF16
// F16 row blocks (matmul.h, RowLayout::kRowBlocks16; matvec_row_blocks.cc):
// y[t * y_stride + r] = <row r, token t> for the rows of blocks [b0, b1)
// and tokens [0, n) (token t at x + t * cols), each (row, token) in the f32
// GEMM's accumulation order whatever b0, b1 and n.
void row_blocks_product(const uint8_t* w, int64_t cols, const float* x, int64_t n, float* y,
                        int64_t y_stride, int64_t b0, int64_t b1);
// The quantized types' float-path matvec (targets without SIMD integer
// kernels: SSE4, EMU128, NEON, SVE).
void matvec_rows_q32(const MatvecArgs& a, int64_t r0, int64_t r1);  // 32-value blocks
void matvec_rows_qk(const MatvecArgs& a, int64_t r0, int64_t r1);   // 256-value blocks

// Integer-dot products (kernels_int.cc) for the types with an integer
// kernel (act_format in act_blocks.h): y[t * y_stride + r] = <row r, token t>
// for rows [r0, r1) and tokens [0, n), from the tokens' quantized
// activations (token t at xq + t * xq_stride). A (row, token) value does not
// depend on r0, r1 or n.
struct IntDotArgs {
  DType type;
  const uint8_t* w;  // row 0
  size_t row_bytes;
  int64_t cols;
  const uint8_t* xq;
  size_t xq_stride;
  int64_t n;
  float* y;
  int64_t y_stride;
};
void int_dot_rows(const IntDotArgs& a, int64_t r0, int64_t r1);
// The same products for n >= 2 tokens in register tiles of tokens
// (kernels_intgemm.cc): every (row, token) bit-identical to int_dot_rows.
void int_gemm_rows(const IntDotArgs& a, int64_t r0, int64_t r1);
// Whether int_gemm_rows uses VNNI dot products now (cpu_features.h,
// kernel_config.h).
bool int_dot_vnni_active();
// Whether int_gemm_rows is faster than the f32 GEMM for prefill-sized
// products of `type` on the active target (matmul's kAuto above
// kIntMatmulMaxTokens tokens).
bool int_gemm_preferred(DType type);
// True when the active target has SIMD integer kernels (x86 AVX2 and up);
// elsewhere int_dot_rows runs a portable scalar version.
bool int_kernels_native();

// n values (whole blocks) of `type` -> f32, bit-identical to dequantize_row_ref.
void dequantize_float(DType type, const uint8_t* src, float* dst, int64_t n);
void dequantize_q32(DType type, const uint8_t* src, float* dst, int64_t n);
void dequantize_qk(DType type, const uint8_t* src, float* dst, int64_t n);

using DequantizeFn = void (*)(DType, const uint8_t*, float*, int64_t);

// Prefill product (see matmul.h): y[i * rows + r] = <row r, x_i>. Weights are
// dequantized once per call, panel by panel, with `dequantize`; BF16
// weights take vdpbf16ps with bf16-rounded activations instead where
// bf16_dot_gemm_active (gemm_bf16.h).
// With row_blocks (F16 in RowLayout::kRowBlocks16) the panels, or AMX's
// operand tiles, are read from the blocks; row_bytes and dequantize are
// unused.
void matmul_panels(DType type, const uint8_t* w, size_t row_bytes, int64_t rows, int64_t cols,
                   DequantizeFn dequantize, const float* x, int64_t n, float* y, ThreadPool& pool,
                   bool row_blocks = false);
// Whether matmul_panels runs BF16 weights through vdpbf16ps on the active
// target (AVX3 or AVX3_DL with AVX512-BF16, where kernel_config.h says so;
// TURBOKV_SIMD=avx2 turns it off).
bool bf16_dot_gemm_active();

// Name of the SIMD target the dispatcher picks now ("AVX3_DL", "AVX2", ...).
const char* active_target_name();

}  // namespace tkv::kernels
