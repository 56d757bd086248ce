// Vector helpers for the online softmax of the attention driver. Decode at
// 32K context evaluates ~16M exponentials per token on a 1B model, so these
// are Highway kernels (scalar std::exp would cost more than reading the KV).
#pragma once

#include <cstddef>

namespace tkv::kv {

// Scores at or below this are masked out (exp gives exactly 0).
inline constexpr float kMaskedScore = -1e30f;

// max(x[0..n)); kMaskedScore for n == 0.
float max_of(const float* x, size_t n);
// x[j] = exp(x[j] - m) (exactly 0 where x[j] <= kMaskedScore); returns the sum.
float exp_and_sum(float* x, size_t n, float m);
// x[j] *= s.
void scale_in_place(float* x, size_t n, float s);
// y[j] += s * x[j].
void add_scaled(const float* x, size_t n, float s, float* y);

}  // namespace tkv::kv
