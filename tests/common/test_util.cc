#include "test_util.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

namespace tkv::test {

namespace fs = std::filesystem;

std::string models_dir() {
  if (const char* env = std::getenv("TURBOKV_MODELS"); env && *env) return env;
  return TURBOKV_DEFAULT_MODELS_DIR;
}

std::string model_path(const std::string& relative) {
  const fs::path p = fs::path(models_dir()) / relative;
  std::error_code ec;
  return fs::is_regular_file(p, ec) ? p.string() : std::string();
}

std::string turbokv_binary() {
  if (const char* env = std::getenv("TURBOKV_BIN"); env && *env && fs::exists(env)) return env;
  return std::string(TURBOKV_BINARY_DIR) + "/apps/turbokv/turbokv";
}

namespace {
struct TempDirs {
  std::mutex mu;
  std::vector<fs::path> dirs;
  ~TempDirs() {
    std::error_code ec;
    for (auto& d : dirs) fs::remove_all(d, ec);
  }
};
TempDirs& temp_dirs() {
  static TempDirs t;
  return t;
}
}  // namespace

std::string temp_dir() {
  std::string tmpl = (fs::temp_directory_path() / "turbokv-test-XXXXXX").string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) return fs::temp_directory_path().string();
  auto& t = temp_dirs();
  std::lock_guard<std::mutex> lock(t.mu);
  t.dirs.emplace_back(buf.data());
  return buf.data();
}

}  // namespace tkv::test
