// Shared helpers of the tensor tests: deterministic random weights of every
// type, the list of supported types, and a loop over the compiled SIMD targets.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "test_util.h"

namespace tkv::test {

// Every type with kernels (DTypeTraits::supported).
std::vector<DType> supported_types();

// n Gaussian values, mean 0, standard deviation `sigma`, from `seed`.
std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f);

// rows x cols Gaussian weights quantized to `type` with quantize_row.
std::vector<uint8_t> random_weights(DType type, int64_t rows, int64_t cols, uint32_t seed);

// rows x cols of random bytes, with every f16 scale field replaced by a
// finite random value (so all quant bit patterns occur, scales stay sane;
// MXFP4's E8M0 byte: a half-scale 2^-8 .. 2^0). With pow2_scales the f16
// fields are +-2^-3 or +-2^-4 instead (MXFP4's half-scale 2^-3 or 2^-4), so
// that the dequantized weights are exact small dyadic numbers.
std::vector<uint8_t> random_block_bytes(DType type, int64_t rows, int64_t cols, uint32_t seed,
                                        bool pow2_scales = false);

// Values per activation block of `type`'s integer-dot kernel (32 or 256), 0
// for a type on the float path (activations not quantized).
int64_t act_block_values(DType type);

// sum_k |w_rk| |x_k| for the error bound of the accuracy contract.
double abs_dot(const float* w, const float* x, int64_t n);

// Equal as values (+0 == -0), or both NaN.
bool same_value(float a, float b);

// A float-weight matmul for the prefill GEMMs' tests: rows x cols weights
// of `type` (random_weights), n tokens of Gaussian activations.
struct FloatProduct {
  DType type;
  int64_t rows, cols, n;
  std::vector<uint8_t> w;
  std::vector<float> x;
};
FloatProduct make_float_product(DType type, int64_t rows, int64_t cols, int64_t n, uint32_t seed);
// The same weights and its first n tokens.
FloatProduct first_tokens(const FloatProduct& p, int64_t n);
// matmul with MatmulKernel::kFloat on a pool of `threads` (y[i * rows + r]).
std::vector<float> run_float_matmul(const FloatProduct& p, int threads = 2);
// Largest |y - y_exact| / sum_k |w_k x_k| over the outputs; y_exact the
// double-precision product (matmul_ref) of the weights and x_exact (the
// product's own activations when empty).
double max_relative_error(const FloatProduct& p, const std::vector<float>& y,
                          const std::vector<float>& x_exact = {});

}  // namespace tkv::test
