// Token ids a model can take: the one check of a vocabulary's range, used
// by the forward pass (Model::eval_batch's item checks) and by every front
// end's prompt check (runtime/prompt_check.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tkv::model {

// The index of the first token id outside [0, n_vocab), or tokens.size().
inline size_t first_outside_vocabulary(std::span<const int32_t> tokens, int n_vocab) {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab) return i;
  return tokens.size();
}

}  // namespace tkv::model
