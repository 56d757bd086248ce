// The few reductions over a vector of floats that the sampler, the model's
// tests, perplexity/KL and the benchmarks all need — the largest value, the
// argmax, exp-weights and their sum, softmax, log-sum-exp and the logit
// soft-cap — implemented once, as Highway kernels (runtime dispatch: a 128K
// vocabulary is scanned several times per sampled token). The attention's online softmax over key
// tiles (kv/softmax_kernels.h) is a different algorithm and stays with it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tkv {

struct MaxScan {
  float max;            // the largest value (meaningless when has_nan_or_inf)
  bool has_nan_or_inf;  // any NaN or +inf (-inf is a legitimate mask)
};
MaxScan scan_max(const float* x, size_t n);

// Index of the largest value, the first one on ties; NaN values are never
// chosen (an all-NaN or empty input gives 0).
int64_t argmax(const float* x, int64_t n);

// w[i] = exp((x[i] - shift) * scale), exactly 0 where the exponent is below
// -87 (where float exp underflows; this includes -inf). Returns the sum of
// the w[i], accumulated in double (10^5 weights summed in float lose digits
// top-p's cut depends on). x must hold no NaN. w may alias x, or be null
// when only the sum is wanted.
double exp_weights(const float* x, size_t n, float shift, float scale, float* w);

// x <- softmax(x) in place (max-subtracted, so any finite input is safe).
void softmax(float* x, int64_t n);

// x[i] <- cap * tanh(x[i] / cap): a logit soft-cap (gemma's final logits
// and gemma2's attention scores); cap > 0.
void soft_cap(float* x, size_t n, float cap);

// log(sum(exp(x[i]))), computed stably (max-subtracted, summed in double);
// with it log p_i = x_i - log_sum_exp. -inf for n = 0; the max itself when
// it is not finite.
double log_sum_exp(const float* x, int64_t n);

}  // namespace tkv
