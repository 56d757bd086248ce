// Weight x activation products, the hot loops of the forward pass.
//
// A weight matrix is a 2-D GGUF tensor: `rows` output features, each a row of
// `cols` input features stored contiguously in its DType's block layout
// (tensor/blocks.h). Activations are always f32.
//
// matvec is decode (one token): memory-bandwidth bound, so it streams each row
// exactly once. matmul is prefill or a batch of decoding sequences (n tokens):
// it reuses each weight block for many tokens. Both are Highway kernels with
// runtime dispatch (TURBOKV_SIMD=avx2, sse4, ... restricts it to one
// target); tensor/reference.h has the scalar versions tests compare to.
// Results do not depend on the thread count (each output is computed by one
// task with an instruction sequence that does not depend on the split).
//
// Weights are dequantized exactly: every value equals what ggml's
// dequantize_row_* (and dequantize_row_ref) gives, bit for bit, because
// each scale x quant product fits the f32 significand.
//
// Accuracy contract, float path (F32/F16/BF16 weights, and quantized weights
// under MatmulKernel::kFloat or under kAuto where !integer_matmul_active,
// e.g. prefill of more than kIntMatmulMaxTokens tokens on AVX-512).
// Activations are not quantized; products are accumulated in f32 with FMA (matvec: several vector
// accumulators per row, one horizontal sum at the end; matmul: per 256-column chunk FMA chains,
// added chunk by chunk). So for every output
//   |y - y_exact| <= ~1e-5 * sum_k |w_k| |x_k|   (cols up to ~16K).
//
// Accuracy contract, integer path (every quantized type: matvec and kAuto
// matmul where integer_matmul_active, and matmul under kInteger). Each token
// is quantized per block of K = 32 values (K = 256 for the K-quants) to
// int8: q_k = round(x_k * 127 / amax), d = amax / 127 (rounded to f16 for
// K = 32, as ggml's q8_0: kernels::act_scale32), so |x_k - d q_k| <= d / 2
// (+ 127 times the f16 rounding of d for K = 32).
// Weight quants times q are summed exactly in integers per block; then the
// block scales d_w * d are applied in f32 (FMA into an 8-lane accumulator,
// one horizontal sum at the end). Hence
//   |y - y_exact| <= sum_k |w_k| d(k) / 2 + ~1e-5 * sum_k |w_k| (|x_k| + d(k) / 2)
// with d(k) the step of k's activation block: the first term is the
// activation quantization (ggml's q8_0 / q8_K do the same), the second the
// float part. The tests check this bound against the double-precision
// product of the dequantized weights and the unquantized x, and exact
// equality with it where every operation is exact (power-of-two scales,
// integer activations).
//
// Row blocks (RowLayout::kRowBlocks16): matvec, matvec_batch and matmul all
// accumulate as matmul's f32 GEMM does (per 256-column chunk an FMA chain
// over the columns in order, chunk sums added in order), so for a token
// they give the same bits, which are also the GEMM's on the same matrix's
// rows (kRows). Where AMX runs matmul, matmul gives AMX's bits instead, the
// same on the blocks as on the rows.
//
// Batch invariance: on the integer path, matmul's token i is bit-identical
// to matvec(x_i) (where integer_path_active; else to matmul of x_i alone
// under kInteger) for every n, row grouping and thread count (one
// accumulation order per (row, token)). The float path's matvec and matmul
// differ from each other in the last bits; each is independent of n and of
// the thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/thread_pool.h"
#include "tensor/dtype.h"

namespace tkv {

// How a matrix's bytes are ordered.
//
// kRows: GGUF's, row r at data + r * row_bytes.
// kRowBlocks16: F16 only, rows a multiple of 16. Rows in blocks of 16, and
//   within a block column by column: the 16 values of column k of rows
//   16b .. 16b + 15 (in row order) are the 32 bytes at
//   data + (b * cols + k) * 32. The same bytes as the rows, reordered in
//   place at load (to_row_blocks): a weight vector is then 16 rows at one
//   column, which the products broadcast each token's x[k] against
//   (kernels/matvec_row_blocks.cc), so that one weight stream serves all
//   the tokens of a small batch without horizontal sums.
enum class RowLayout : uint8_t { kRows, kRowBlocks16 };
inline constexpr int64_t kRowBlockRows = 16;

struct WeightMatrix {
  DType type = DType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;  // == tkv::row_bytes(type, cols)
  RowLayout layout = RowLayout::kRows;

  // Row r's bytes (kRows only: a row-block matrix has no contiguous rows;
  // weight_row reads either).
  const uint8_t* row(int64_t r) const { return data + size_t(r) * row_bytes; }
  size_t total_bytes() const { return size_t(rows) * row_bytes; }
};

// Builds a WeightMatrix, checking that the type is supported, cols is a
// multiple of its block size and data is 2-byte aligned (GGUF data is
// 32-byte aligned; MXFP4, whose blocks are bytes only, may start at any
// address); tkv::Error naming `what` and the type otherwise.
WeightMatrix make_weight(DType type, const void* data, int64_t rows, int64_t cols,
                         const char* what = "tensor");

// Whether w (in kRows) is to be reordered into row blocks: F16, rows a
// multiple of 16, and row blocks preferred in this process
// (kernel_config.h: use_row_blocks, AMD CPUs, serve's batches,
// TURBOKV_ROW_BLOCKS). The prefill's GEMM reads them as they are (the f32
// GEMM's panels, AMX's B operand tiles).
bool row_blocks_pay_off(const WeightMatrix& w);

// Reorders w's bytes (kRows, row_blocks_pay_off) into kRowBlocks16 in
// place, its blocks split over the pool: `bytes` is w.data, writable.
// Returns w with the new layout.
WeightMatrix to_row_blocks(const WeightMatrix& w, uint8_t* bytes, ThreadPool& pool);

// Rows [r0, r1) of w as a matrix of their own, in w's layout (row blocks:
// r0 and r1 multiples of kRowBlockRows). Its matvec and matvec_batch give
// those rows the bits w's give them wherever r0 and r1 are multiples of
// kSliceRows (or r1 = rows): a row's result does not depend on the rows
// beside it, and those products group rows by at most kSliceRows.
inline constexpr int64_t kSliceRows = 16;
WeightMatrix row_slice(const WeightMatrix& w, int64_t r0, int64_t r1);

// Row r of w as f32 (cols values), whatever its layout (the embedding
// lookup).
void weight_row(const WeightMatrix& w, int64_t r, float* dst);

// y[r] = <row r, x> for r in [0, rows).
void matvec(const WeightMatrix& w, const float* x, float* y, ThreadPool& pool);

// y[i * rows + r] = matvec(w, x_i)[r], bit for bit, for i in [0, n): the
// small-batch product of batched decode, whose rows must not depend on the
// batch. Quantized weights take the integer path (as matmul under
// kInteger) where it is native (integer_path_active), else one matvec per
// token (the float path matvec takes there); F32/F16/BF16 weights a kernel
// with matvec's exact per-row accumulation order that reads each weight row
// from memory once for all n tokens (matmul's float GEMM accumulates in
// another order).
void matvec_batch(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool& pool);

// Which kernel matmul runs for a type with an integer-dot kernel (every
// other type always takes the f32 GEMM).
enum class MatmulKernel {
  kAuto,     // integer_matmul_active(type, n): integer dot products, else f32 GEMM
  kInteger,  // integer dot products for every n
  kFloat,    // dequantize to f32 and GEMM, activations unquantized
};
// Up to this many tokens (the batched decode of many sequences) kAuto runs
// the integer kernel wherever integer_path_active, its token i
// bit-identical to matvec(x_i). Above it (prefill) kAuto runs it only where
// its token tiles beat the register-tiled f32 GEMM: on the AVX2 target for
// q4_K and q5_K (and q2_K, iq4_xs with AVX-VNNI); on AVX-512 the f32 GEMM
// is faster for every type.
// Either way a token's result does not depend on n once n exceeds it.
inline constexpr int64_t kIntMatmulMaxTokens = 16;

// y[i * rows + r] = <row r, x[i * cols ...]> for i in [0, n).
void matmul(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool& pool,
            MatmulKernel kernel = MatmulKernel::kAuto);

// The kernel kAuto runs for more than kIntMatmulMaxTokens tokens of a
// `type` weight, to be passed explicitly by a caller that gives some of a
// prefill chunk's rows in a smaller call (the model's last layer keeps only
// the rows whose logits are wanted): each row then gets the bits the whole
// chunk gives it.
MatmulKernel prefill_kernel(DType type);

// Tokens per matmul call that amortize the prefill kernel's per-call work
// for a `type` weight (callers that cut a long batch into calls, such as
// the FFN, use it): 512 where F16 / BF16 take AMX, which converts the
// weights into its operand tiles once per call, a cost that is a sizeable
// part of the product at 128 tokens and small at 512; else 256 (those
// kernels read the weights in place, but the f32 GEMM still unpacks them
// and transposes the activations once per call, which 256 rows amortize;
// beyond that the larger scratch buys nothing).
int64_t matmul_rows_per_call(DType type);

// Dequantizes one row (or any run of whole blocks) of n elements to f32.
void dequantize_row(DType type, const uint8_t* src, float* dst, int64_t n);

// Quantizes n f32 values (multiple of the block size) into `type` (used by
// `turbokv synth --type` and tests). Supported for every type with `supported`.
void quantize_row(DType type, const float* src, uint8_t* dst, int64_t n);

// Whether matvec and kAuto matmul of up to kIntMatmulMaxTokens tokens take
// the integer path for `type` on the active SIMD target: every quantized
// type on x86 with AVX2 or better. Elsewhere (SSE4, EMU128, NEON, SVE) they
// keep the float path, whose SIMD decoders are faster there than the
// portable integer kernel; MatmulKernel::kInteger runs that portable kernel
// (matmul with n = 1 under kInteger is then the batch-invariant "matvec").
bool integer_path_active(DType type);

// Whether matmul(..., MatmulKernel::kAuto) of n tokens of a `type` weight
// runs the integer path (see kIntMatmulMaxTokens); for a fixed type and
// target the answer is the same for every n > kIntMatmulMaxTokens.
bool integer_matmul_active(DType type, int64_t n);

// Bytes of quantized activations the integer-dot path needs for n tokens of
// `cols` values of a `type` weight (0 for a type that keeps the float path).
size_t quantized_activation_bytes(DType type, int64_t cols, int64_t n);

// Bytes held by the calling thread's grow-only scratch of the products: the
// buffer of quantized activations (matvec/matmul quantize into it; it grows
// to the largest quantized_activation_bytes seen on this thread) and the
// prefill GEMMs' packed operands and accumulators (for all threads of the
// call, allocated by the calling thread). Never shrunk.
size_t activation_scratch_bytes();

// Name of the SIMD target the kernels run on now ("AVX3_DL", "AVX2", "SSE4",
// "EMU128", ...), for reports.
const char* active_simd_target();

}  // namespace tkv
