// Vectorized (Highway, runtime dispatch) passes over a vocabulary of logits:
// the two O(n_vocab) steps that dominate sampling when no top-k cut comes
// first.
#pragma once

#include <cstddef>

namespace tkv::sample {

struct LogitScan {
  float max;            // largest logit (meaningless when has_nan_or_inf)
  bool has_nan_or_inf;  // any NaN or +inf (-inf is a legitimate mask)
};
LogitScan scan_logits(const float* x, size_t n);

// w[i] = exp((x[i] - shift) * scale), exactly 0 where the exponent is below
// -87 (where float exp underflows; this includes -inf). Returns the sum of
// the w[i], accumulated in double. x must hold no NaN. w may alias x.
double exp_weights(const float* x, size_t n, float shift, float scale, float* w);

}  // namespace tkv::sample
