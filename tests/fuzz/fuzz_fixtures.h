// Where fuzz targets find the shared fixtures (TURBOKV_MODELS, else the
// ../shared/models beside the source tree), and what they do when one is
// missing: the replay test reports itself skipped, or failed under
// TURBOKV_REQUIRE_FIXTURES=1, as the GoogleTest suites do.
#pragma once

#include <string>

namespace tkv::fuzz {

// Full path of a fixture, or "" when it does not exist.
std::string fixture_path(const std::string& relative);
// Records that the target cannot run here; replay_main exits with 77 (ctest
// SKIP_RETURN_CODE) or, when fixtures are required, aborts with the reason.
void missing_fixture(const std::string& relative);
// True once missing_fixture() was called.
bool fixture_missing();

}  // namespace tkv::fuzz
