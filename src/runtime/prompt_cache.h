// A prompt cache (`run --prompt-cache FILE`): a long prompt is prefilled once.
// The cache file is a session (session_state.h) holding the prompt up to its
// last -ub boundary before its last token: the state a prefill in -ub
// chunks has when its last chunk begins, so a run that restores it and
// prefills that chunk gives the bits a run without the file gives (the last
// token's logits, which the first sampled token needs, are not part of a KV
// cache). The file records the -ub and thread count it was made with (they
// decide a prefill's bits) and is used only under the same ones.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace tkv::runtime {

class Sequence;

struct PromptCacheUse {
  int64_t restored = 0;  // prompt tokens restored from the file
  std::string note;      // why the file was not used (empty when used or absent)
};

// Where the cache of a prompt of `prompt_tokens` ends: its last multiple of
// `ubatch` before the last token.
inline int64_t prompt_cache_point(size_t prompt_tokens, int ubatch) {
  return prompt_tokens < 1 ? 0 : int64_t(prompt_tokens - 1) / ubatch * ubatch;
}

// Restores the longest usable prefix of `prompt` from `path` into an empty
// session: the file's tokens must be a prefix of prompt[0, n-1) ending on
// the session's -ub grid, made with its -ub and thread count. A missing file
// is not an error; an unusable one (other model, other KV settings, other
// prompt or -ub, corrupt) is reported in `note` and left to be overwritten.
PromptCacheUse restore_prompt_cache(const std::string& path, Sequence& session,
                                    std::span<const int32_t> prompt);

// Writes the cache (the session holds prompt_cache_point() tokens).
void save_prompt_cache(const std::string& path, const Sequence& session);

// True when the file should be (re)written once the session holds
// prompt_cache_point() tokens.
inline bool prompt_cache_needs_save(const PromptCacheUse& use, size_t prompt_tokens, int ubatch) {
  return use.restored < prompt_cache_point(prompt_tokens, ubatch);
}

}  // namespace tkv::runtime
