// Asking questions of a prefilled context: each question is answered from
// the same context state, independently of the others (a question and its
// answer never leak into the next one). The context's longest common prefix
// is evaluated once; each question then runs in a fork of the session (its
// pages shared copy-on-write, runtime::Sequence::fork), and the
// answer is the runtime's greedy generation loop (runtime::generate).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/generation.h"

namespace tkv::bench {

struct Answer {
  std::string text;    // the decoded greedy continuation
  std::string digits;  // its first run of digits
  int64_t prompt_tokens = 0;
};

struct AskOptions {
  int max_answer_tokens = 8;
};

// `session` already holds prompts[i][0 .. session.tokens().size()) for every
// i (checked). Greedy decoding stops at an end-of-generation token, a
// newline after some text, or once a run of digits has ended.
std::vector<Answer> answer_prompts(runtime::Sequence& session,
                                   const std::vector<std::vector<int32_t>>& prompts,
                                   const AskOptions& opts);

}  // namespace tkv::bench
