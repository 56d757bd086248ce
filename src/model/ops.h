// The small element-wise operations of the forward pass: RMSNorm, RoPE,
// SwiGLU's SiLU(gate) * up, residual add (softmax, argmax and log-sum-exp
// are common/vec_math.h).
//
// They are cheap next to the weight products (O(width) per token against
// O(width^2)), but at 8K-wide FFN activations a scalar loop with a libm exp()
// per element would show up in decode, so the loops are Highway kernels with
// runtime dispatch. RoPE stays scalar: it touches n_rot/2 pairs per head and
// its sines and cosines are computed once per chunk, not per layer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/thread_pool.h"
#include "model/config.h"

namespace tkv::model::ops {

// y[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], i < n (w null: no weight).
// y may alias x.
void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps);

// RMSNorm of `rows` rows of n values (row stride n), in parallel over rows
// when there are several. y may alias x.
void rmsnorm_rows(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps,
                  ThreadPool& pool);

// gate[i] = silu(gate[i]) * up[i] with silu(x) = x / (1 + e^-x), i < n.
void silu_mul(float* gate, const float* up, int64_t n);

// gate[r] = act(gate[r], up[r]) for `rows` rows of n_ff values, rows in
// parallel (each row's bits independent of the others).
void gated_activation_rows(GatedActivation act, float* gate, const float* up, int rows, int n_ff,
                           ThreadPool& pool);

// y[i] += x[i], i < n.
void add(float* y, const float* x, int64_t n);

// Adds the same `bias` (n values) to each of `rows` rows of n values.
void add_bias_rows(float* y, const float* bias, int64_t rows, int64_t n);

// RoPE rotation speeds of one model: inv_freq[i] for dimension pair i < n_rot/2.
struct RopeFrequencies {
  RopeStyle style = RopeStyle::Normal;
  int n_rot = 0;
  // freq_scale * base^(-2i/n_rot) / freq_factor[i] (YaRN: the blended scale)
  std::vector<double> inv_freq;
  float mscale = 1.0f;  // cos and sin are scaled by it (YaRN; 1 otherwise)

  // `freq_factors`: n_rot/2 divisors (Llama 3's rope_freqs tensor, for a
  // spec with freq_factors set), or empty.
  static RopeFrequencies make(const RopeSpec& spec, std::span<const float> freq_factors);
  // The model-wide RoPE of `config`.
  static RopeFrequencies make(const ModelConfig& config, std::span<const float> freq_factors);
};

// cos/sin of every (position, pair) of a chunk: positions pos0 .. pos0+T-1,
// row-major T x n_rot/2. Angles are computed in double so that position
// 100000 is as accurate as position 1.
void rope_angles(const RopeFrequencies& rope, int64_t pos0, int64_t T, float* cos_out,
                 float* sin_out);

// Rotates the first n_rot dims of each of the `n_heads` heads (head_dim
// apart) of one token, with that token's row of the cos/sin tables.
void rope_apply(const RopeFrequencies& rope, float* x, int n_heads, int head_dim,
                const float* cos_row, const float* sin_row);

}  // namespace tkv::model::ops
