// Activation blocks of the integer-dot kernels: one token's f32 activations
// quantized to int8, block by block, as ggml's q8_0 / q8_K do, so that a
// weight block times an activation block is an integer dot product.
//
// Per block of K values: amax = max |x_k|, d = amax / 127 (f32),
// q_k = round(x_k * 127 / amax) in [-127, 127] (0 when amax is 0). Hence
// |x_k - d q_k| <= d / 2 (up to one f32 rounding of the reciprocal, a
// relative 2^-23 of a quant step). The block sums of q serve the types whose
// weights carry an offset or a min (sum_k (a q_k + b) x_k needs sum_k x_k).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace tkv::kernels {

// q8_0-style block for the 32-value weight types.
struct ActBlock32 {
  static constexpr int kValues = 32;
  float d;
  int16_t sum;  // sum of q
  int16_t pad;
  int8_t q[32];
};
static_assert(sizeof(ActBlock32) == 40);

// q8_K-style block for the 256-value super-block types. 320 bytes, q at
// offset 64 and psums at 48, so that in a 64-byte aligned buffer no load
// of q straddles a cache line and psums is one aligned 16-byte load.
struct ActBlock256 {
  static constexpr int kValues = 256;
  float d;
  uint8_t pad[12];
  int16_t bsums[16];  // bsums[g] = sum of q[16g .. 16g + 15]
  int16_t psums[8];   // psums[i] = bsums[2i] + bsums[2i + 1] (32-value groups)
  int8_t q[256];
};
static_assert(sizeof(ActBlock256) == 320 && offsetof(ActBlock256, psums) == 48 &&
              offsetof(ActBlock256, q) == 64);

// Which activation blocks a weight type's integer kernel takes; kNone for a
// type that keeps the float path.
enum class ActFormat { kNone, kQ8x32, kQ8x256 };
ActFormat act_format(DType type);

// Bytes of one token's quantized activations (cols a multiple of the block).
size_t act_row_bytes(ActFormat format, int64_t cols);

// Quantizes one token (cols values) into cols / K blocks at dst with
// Highway ops (act_quant_simd.cc), byte for byte what quantize_act_scalar
// gives: every operation is exactly rounded (max, divide, multiply,
// round-to-nearest-even through 1.5 * 2^23), so a token's blocks are the
// same on every target, in every batch and for every thread count. A block
// with a NaN gets d = NaN and every q (and sum) 0; an infinite value d =
// inf and q = 0.
void quantize_act(ActFormat format, const float* x, int64_t cols, uint8_t* dst);
void quantize_act_simd(ActFormat format, const float* x, int64_t cols, uint8_t* dst);
// The scalar reference (act_quant.cc): plain C++, one value at a time.
void quantize_act_scalar(ActFormat format, const float* x, int64_t cols, uint8_t* dst);

}  // namespace tkv::kernels
