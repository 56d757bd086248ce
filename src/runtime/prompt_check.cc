#include "runtime/prompt_check.h"

#include "model/token_ids.h"

namespace tkv::runtime {

PromptVerdict check_prompt(std::span<const int32_t> tokens, const PromptLimits& limits) {
  using Problem = PromptVerdict::Problem;
  if (tokens.empty()) return {.problem = Problem::kEmpty};
  if (const size_t i = model::first_outside_vocabulary(tokens, limits.n_vocab); i < tokens.size())
    return {.problem = Problem::kOutsideVocabulary, .index = i};
  if (!limits.windowed && int64_t(tokens.size()) + limits.room_after > limits.context)
    return {.problem = Problem::kTooLong};
  return {};
}

}  // namespace tkv::runtime
