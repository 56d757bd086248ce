#include "prompt_cache.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/error.h"
#include "generation.h"
#include "session_state.h"

namespace tkv::cli {

PromptCacheUse restore_prompt_cache(const std::string& path, InferenceSession& session,
                                    std::span<const int32_t> prompt) {
  PromptCacheUse use;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return use;
  // Check the prompt against the saved ids before the (larger) cache is read.
  try {
    const auto state = nlohmann::json::parse(read_file(session_sidecar_path(path)));
    const auto saved = state.at("tokens").get<std::vector<int32_t>>();
    if (saved.empty() || saved.size() + 1 > prompt.size() ||
        !std::equal(saved.begin(), saved.end(), prompt.begin())) {
      use.note = "it holds another prompt";
      return use;
    }
  } catch (const Error& e) {
    use.note = e.what();
    return use;
  } catch (const nlohmann::json::exception& e) {
    use.note = str(session_sidecar_path(path), ": ", e.what());
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

}  // namespace tkv::cli
