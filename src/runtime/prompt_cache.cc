#include "runtime/prompt_cache.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "common/error.h"
#include "runtime/generation.h"
#include "runtime/session_state.h"

namespace tkv::runtime {

namespace {

constexpr const char* kPlanName = "turbokv.prompt_cache.plan";

// What decides the bits of the prefill the file holds.
std::string plan_of(const Sequence& session) {
  return str("ub=", session.ubatch(), " threads=", session.pool().size());
}

}  // namespace

void save_prompt_cache(const std::string& path, const Sequence& session) {
  session.save(path, {{kPlanName, plan_of(session)}});
}

PromptCacheUse restore_prompt_cache(const std::string& path, Sequence& session,
                                    std::span<const int32_t> prompt) {
  PromptCacheUse use;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return use;
  // Check the prompt against the saved ids before the (larger) cache is read.
  try {
    const kv::SessionMeta meta = peek_session(path);
    const std::vector<int32_t>& saved = meta.tokens;
    if (saved.empty() || saved.size() + 1 > prompt.size() ||
        !std::equal(saved.begin(), saved.end(), prompt.begin())) {
      use.note = "it holds another prompt";
      return use;
    }
    const auto plan = meta.strings.find(kPlanName);
    if (plan == meta.strings.end() || plan->second != plan_of(session) ||
        int64_t(saved.size()) % session.ubatch() != 0) {
      use.note = str("it was prefilled with other settings (",
                     plan == meta.strings.end() ? "none recorded" : plan->second, "; now ",
                     plan_of(session), ")");
      return use;
    }
  } catch (const Error& e) {
    use.note = e.what();
    return use;
  }
  try {
    session.load(path);
    use.restored = int64_t(session.tokens().size());
  } catch (const Error& e) {
    use.note = e.what();
  }
  return use;
}

}  // namespace tkv::runtime
