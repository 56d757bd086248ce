// The checks a prompt passes before it becomes a sequence's input, made in
// one place for every front end (`turbokv run`, the server's HTTP routes and
// its scheduler): each says what is wrong in its own words (a CLI error, an
// OpenAI-shaped 400), from the same verdict.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tkv::runtime {

struct PromptLimits {
  int n_vocab = 0;
  int64_t context = 0;     // positions of a sequence
  bool windowed = false;   // a window policy: a sequence may run past `context`
  int64_t room_after = 0;  // positions that must stay free after the prompt
};

struct PromptVerdict {
  enum class Problem {
    kNone,
    kEmpty,              // no tokens
    kOutsideVocabulary,  // tokens[index] is not a token id of the vocabulary
    kTooLong,            // more than context - room_after tokens (never when windowed)
  };
  Problem problem = Problem::kNone;
  size_t index = 0;  // kOutsideVocabulary: where
  bool ok() const { return problem == Problem::kNone; }
};

PromptVerdict check_prompt(std::span<const int32_t> tokens, const PromptLimits& limits);

}  // namespace tkv::runtime
