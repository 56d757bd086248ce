// Helpers shared by the test suites: where the shared fixtures live, and
// how to skip (with a printed reason) when one is absent.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tensor/kernel_config.h"

namespace tkv::test {

// TURBOKV_MODELS if set, else the ../shared/models next to the source tree.
std::string models_dir();
// TURBOKV_SHARED if set, else the ../shared next to the source tree (chat
// templates and other non-model fixtures).
std::string shared_dir();
// Full path of a fixture, or "" when it does not exist.
std::string model_path(const std::string& relative);
// Path of the built `turbokv` binary (for CLI tests).
std::string turbokv_binary();
// n values from N(0, scale^2), seeded (the same values for the same seed).
std::vector<float> random_vector(int64_t n, uint32_t seed, float scale = 1.0f);
// n token ids in [0, vocab), seeded (a small LCG: the same ids for the same seed).
std::vector<int32_t> random_tokens(int n, int vocab, uint32_t seed);
// Whether two non-empty float arrays are bit-identical.
bool same_bits(std::span<const float> a, std::span<const float> b);
// Sets one switch of the process's kernel configuration
// (tensor/kernel_config.h), e.g. set_kernel_switch(&KernelConfig::amx,
// false); returns its value before, to set back. Inline: only tests linked
// with the engine use it.
template <class T>
T set_kernel_switch(T KernelConfig::*field, T value) {
  KernelConfig config = kernel_config();
  const T before = config.*field;
  config.*field = value;
  set_kernel_config(config);
  return before;
}
// F16 row blocks preferred (KernelConfig::row_blocks) while it lives,
// whatever the CPU's default; the setting before it after.
class PreferRowBlocks {
 public:
  PreferRowBlocks() : before_(set_kernel_switch(&KernelConfig::row_blocks, KernelChoice::kOn)) {}
  ~PreferRowBlocks() { set_kernel_switch(&KernelConfig::row_blocks, before_); }
  PreferRowBlocks(const PreferRowBlocks&) = delete;
  PreferRowBlocks& operator=(const PreferRowBlocks&) = delete;

 private:
  KernelChoice before_;
};
// The descriptor of the unnamed page file a KV pool keeps open in `dir`
// (found through /proc/self/fd), -1 if none.
int page_file_fd(const std::string& dir);
// A fresh, empty temporary directory for this test (removed at exit).
std::string temp_dir();
// True when TURBOKV_REQUIRE_FIXTURES=1 (CI): a missing fixture then fails
// its test instead of skipping it, so a green run means the model tests ran.
bool fixtures_required();

// Calls fn(target name) with each SIMD target that this build compiled and
// this CPU supports, forced in turn (hwy::SetSupportedTargetsForTest), then
// restores the default dispatch. Prints the list once per process.
void for_each_simd_target(const std::function<void(const std::string& target)>& fn);
// The targets for_each_simd_target visits, by name, best first.
std::vector<std::string> simd_targets_covered();

}  // namespace tkv::test

// Ends the current test because a shared fixture is missing: a skip, or a
// failure under TURBOKV_REQUIRE_FIXTURES=1. Stream the reason into it:
//   if (path.empty()) TKV_MISSING_FIXTURE << "stories260K.gguf not found";
#define TKV_MISSING_FIXTURE                                                                      \
  return GTEST_MESSAGE_(                                                                         \
      ::tkv::test::fixtures_required() ? "required fixture missing (TURBOKV_REQUIRE_FIXTURES=1)" \
                                       : "Skipped",                                              \
      ::tkv::test::fixtures_required() ? ::testing::TestPartResult::kFatalFailure                \
                                       : ::testing::TestPartResult::kSkip)

// Skips (or fails, see above) the current test when a shared fixture is
// missing. Usage: TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
#define TKV_REQUIRE_FIXTURE(var, relative)                                       \
  const std::string var = ::tkv::test::model_path(relative);                     \
  if (var.empty()) {                                                             \
    TKV_MISSING_FIXTURE << "fixture " << (relative) << " not found under "       \
                        << ::tkv::test::models_dir() << " (set TURBOKV_MODELS)"; \
  }
