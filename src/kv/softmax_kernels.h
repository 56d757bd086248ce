// Vector helpers for the online softmax of the attention driver. Decode at
// 32K context evaluates ~16M exponentials per token on a 1B model, so these
// are Highway kernels (scalar std::exp would cost more than reading the KV).
#pragma once

#include <cstddef>

namespace tkv::kv {

// Scores at or below this are masked out (exp gives exactly 0).
inline constexpr float kMaskedScore = -1e30f;

// One key tile of an online softmax, for `rows` rows of scores (row r at
// scores + r * stride, `len` values, masked entries <= kMaskedScore):
//   m' = max(m[r], max(row)); corr[r] = exp(m[r] - m'); row = exp(row - m');
//   l[r] = l[r] * corr[r] + sum(row); m[r] = m'.
// A row with nothing visible becomes all zeros and keeps m, l (corr = 1).
void online_softmax_tile(float* scores, size_t stride, int rows, int len, float* m, float* l,
                         float* corr);

// x[j] *= s.
void scale_in_place(float* x, size_t n, float s);
// y[j] += s * x[j].
void add_scaled(const float* x, size_t n, float s, float* y);

}  // namespace tkv::kv
