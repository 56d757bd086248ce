// Asking questions of a prefilled context: each question is answered from
// the same context state, independently of the others (a question and its
// answer never leak into the next one). The context's longest common prefix
// is evaluated once; the cache is saved to a session file (the compressed
// pages exactly as they are) and restored before each question.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tkv::bench {

struct Answer {
  std::string text;    // the decoded greedy continuation
  std::string digits;  // its first run of digits
  int64_t prompt_tokens = 0;
};

struct AskOptions {
  int ubatch = 512;
  int max_answer_tokens = 8;
};

// `cache` already holds prompts[i][0 .. cache.n_tokens()) for every i (checked).
// Greedy decoding stops at an end-of-generation token, a newline after some
// text, or once a run of digits has ended.
std::vector<Answer> answer_prompts(const model::Model& model, ThreadPool& pool,
                                   const tok::Tokenizer& tok, kv::KvCache& cache,
                                   const std::vector<std::vector<int32_t>>& prompts,
                                   const AskOptions& opts);

}  // namespace tkv::bench
