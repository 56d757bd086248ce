// A prompt cache (`run --prompt-cache FILE`): a long prompt is prefilled once. The cache file
// is a session (session_state.h) holding every prompt token but the last;
// the last one is always evaluated again, because its logits (which the
// first sampled token needs) are not part of a KV cache.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace tkv::runtime {

class InferenceSession;

struct PromptCacheUse {
  int64_t restored = 0;  // prompt tokens restored from the file
  std::string note;      // why the file was not used (empty when used or absent)
};

// Restores the longest usable prefix of `prompt` from `path` into an empty
// session: the file's tokens must be a prefix of prompt[0, n-1). A missing
// file is not an error; an unusable one (other model, other KV settings,
// other prompt, corrupt) is reported in `note` and left to be overwritten.
PromptCacheUse restore_prompt_cache(const std::string& path, InferenceSession& session,
                                    std::span<const int32_t> prompt);

// True when the file should be (re)written after feeding prompt[0, n-1).
inline bool prompt_cache_needs_save(const PromptCacheUse& use, size_t prompt_tokens) {
  return prompt_tokens > 1 && use.restored < int64_t(prompt_tokens) - 1;
}

}  // namespace tkv::runtime
