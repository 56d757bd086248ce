#include "runtime/prompt_cache.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "common/error.h"
#include "runtime/generation.h"
#include "runtime/session_state.h"

namespace tkv::runtime {

PromptCacheUse restore_prompt_cache(const std::string& path, InferenceSession& session,
                                    std::span<const int32_t> prompt) {
  PromptCacheUse use;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return use;
  // Check the prompt against the saved ids before the (larger) cache is read.
  try {
    const std::vector<int32_t> saved = peek_session(path).tokens;
    if (saved.empty() || saved.size() + 1 > prompt.size() ||
        !std::equal(saved.begin(), saved.end(), prompt.begin())) {
      use.note = "it holds another prompt";
      return use;
    }
  } catch (const Error& e) {
    use.note = e.what();
    return use;
  }
  try {
    load_session(path, session);
    use.restored = int64_t(session.tokens().size());
  } catch (const Error& e) {
    use.note = e.what();
  }
  return use;
}

}  // namespace tkv::runtime
