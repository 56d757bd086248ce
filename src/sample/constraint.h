// A rule on which tokens may come next (a grammar: src/grammar), applied
// by the Sampler last in its adjustment step (after the logit bias and the
// penalties) and before any filter: the logits of the tokens it forbids
// become -inf, so greedy, top-k, top-p, min-p and the draw only ever see
// allowed tokens. The sampler tells it every reply token it accepts.
#pragma once

#include <cstdint>

namespace tkv::sample {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logit of every token that may not come next to -inf (at
  // least one token stays allowed, or it throws tkv::Error).
  virtual void mask(float* logits, int n_vocab) = 0;
  // The token that came next (never one mask() forbade).
  virtual void accept(int32_t token) = 0;
};

}  // namespace tkv::sample
