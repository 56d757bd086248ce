// Helpers shared by the test suites: where the shared fixtures live, and
// how to skip (with a printed reason) when one is absent.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace tkv::test {

// TURBOKV_MODELS if set, else the ../shared/models next to the source tree.
std::string models_dir();
// Full path of a fixture, or "" when it does not exist.
std::string model_path(const std::string& relative);
// Path of the built `turbokv` binary (for CLI tests).
std::string turbokv_binary();
// A fresh, empty temporary directory for this test (removed at exit).
std::string temp_dir();

}  // namespace tkv::test

// Skips the current test, printing why, when a shared fixture is missing.
// Usage: TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
#define TKV_REQUIRE_FIXTURE(var, relative)                                        \
  const std::string var = ::tkv::test::model_path(relative);                      \
  if (var.empty()) {                                                              \
    GTEST_SKIP() << "fixture " << (relative) << " not found under "               \
                 << ::tkv::test::models_dir() << " (set TURBOKV_MODELS)";         \
  }
