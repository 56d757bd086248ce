#include "fuzz_fixtures.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string_view>

namespace tkv::fuzz {

namespace {
bool g_missing = false;
}

std::string fixture_path(const std::string& relative) {
  const char* env = std::getenv("TURBOKV_MODELS");
  const std::filesystem::path dir = env && *env ? env : TURBOKV_DEFAULT_MODELS_DIR;
  std::error_code ec;
  const auto p = dir / relative;
  return std::filesystem::is_regular_file(p, ec) ? p.string() : std::string();
}

void missing_fixture(const std::string& relative) {
  const char* req = std::getenv("TURBOKV_REQUIRE_FIXTURES");
  std::fprintf(stderr, "fuzz: fixture %s not found (set TURBOKV_MODELS)\n", relative.c_str());
  if (req && std::string_view(req) == "1") {
    std::fprintf(stderr, "fuzz: fixtures are required (TURBOKV_REQUIRE_FIXTURES=1)\n");
    std::abort();
  }
  g_missing = true;
}

bool fixture_missing() {
  return g_missing;
}

}  // namespace tkv::fuzz
