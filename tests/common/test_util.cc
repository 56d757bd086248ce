#include "test_util.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <string_view>
#include <vector>

#include "hwy/targets.h"

namespace tkv::test {

namespace fs = std::filesystem;

std::string models_dir() {
  if (const char* env = std::getenv("TURBOKV_MODELS"); env && *env) return env;
  return TURBOKV_DEFAULT_MODELS_DIR;
}

std::string shared_dir() {
  if (const char* env = std::getenv("TURBOKV_SHARED"); env && *env) return env;
  return TURBOKV_DEFAULT_SHARED_DIR;
}

std::string model_path(const std::string& relative) {
  const fs::path p = fs::path(models_dir()) / relative;
  std::error_code ec;
  return fs::is_regular_file(p, ec) ? p.string() : std::string();
}

std::vector<float> random_vector(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

bool fixtures_required() {
  const char* env = std::getenv("TURBOKV_REQUIRE_FIXTURES");
  return env && std::string_view(env) == "1";
}

std::vector<std::string> simd_targets_covered() {
  std::vector<std::string> names;
  for (int64_t target : hwy::SupportedAndGeneratedTargets())
    names.push_back(hwy::TargetName(target));
  return names;
}

void for_each_simd_target(const std::function<void(const std::string& target)>& fn) {
  static std::once_flag printed;
  std::call_once(printed, [] {
    std::string all;
    for (const auto& n : simd_targets_covered()) all += " " + n;
    std::cout << "[ simd     ] targets compiled and supported here:" << all << std::endl;
  });
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string name = hwy::TargetName(target);
    SCOPED_TRACE("highway target " + name);
    fn(name);
  }
  hwy::SetSupportedTargetsForTest(0);
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

std::vector<int32_t> random_tokens(int n, int vocab, uint32_t seed) {
  std::vector<int32_t> t;
  uint32_t x = seed;
  for (int i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    t.push_back(int32_t((x >> 8) % uint32_t(vocab)));
  }
  return t;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && !a.empty() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

int page_file_fd(const std::string& dir) {
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = fs::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind(dir + "/", 0) == 0) return std::stoi(e.path().filename().string());
  }
  return -1;
}

}  // namespace tkv::test
