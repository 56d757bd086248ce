// Activation blocks of the integer-dot kernels: one token's f32 activations
// quantized to int8, block by block, as ggml's q8_0 / q8_K do, so that a
// weight block times an activation block is an integer dot product.
//
// Per block of K values: amax = max |x_k|, q_k = round(x_k * 127 / amax) in
// [-127, 127] (0 when amax is 0), and the scale d: amax / 127 in f32 for the
// 256-value blocks (ggml's q8_K keeps a float), rounded to f16 for the
// 32-value blocks (act_scale32: ggml's q8_0 stores an f16 d). Hence
// |x_k - d q_k| <= d / 2 plus, for the 32-value blocks, 127 times the f16
// rounding of d (a relative 2^-11 of d for a normal f16). The block sums of
// q serve the types whose weights carry an offset or a min (sum_k (a q_k +
// b) x_k needs sum_k x_k).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/f16.h"
#include "tensor/dtype.h"

namespace tkv::kernels {

// d of a 32-value block of largest magnitude amax: amax / 127 rounded to f16
// (subnormals included), as ggml's q8_0 activations carry it, so that the
// integer-dot products of the 32-value weight types (whose weights llama.cpp
// multiplies with q8_0 activations) give ggml's values. The rounding is not
// noise to be neglected: int8 activations turn any difference of the scale
// into flipped roundings downstream, and a mixture of experts' router turns
// those into other experts. A scale beyond the f16 range keeps its f32
// value (ggml's would be infinite).
inline float act_scale32(float amax) {
  const float d = amax / 127.0f;
  return d <= 65504.0f ? round_f16(d) : d;
}

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
