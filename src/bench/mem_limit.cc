#include "bench/mem_limit.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tkv::bench {

namespace fs = std::filesystem;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return bool(out);
}

bool has_word(const std::string& text, const std::string& word) {
  std::istringstream in(text);
  std::string w;
  while (in >> w)
    if (w == word) return true;
  return false;
}

// Mount point of the cgroup2 file system, from /proc/self/mountinfo.
std::string cgroup2_mount() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype;
    tail >> fstype;
    if (fstype != "cgroup2") continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, devno, root, mount_point;
    head >> id >> parent >> devno >> root >> mount_point;
    return mount_point;
  }
  return {};
}

// Our cgroup v2 path ("0::/a/b" in /proc/self/cgroup).
std::string own_cgroup2_path() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return {};
}

}  // namespace

const char* limit_method_name(LimitMethod m) {
  switch (m) {
    case LimitMethod::kNone:
      return "none";
    case LimitMethod::kCgroupV2:
      return "cgroup-v2 memory.max";
    case LimitMethod::kRlimitAs:
      return "RLIMIT_AS";
  }
  return "?";
}

MemoryLimit::MemoryLimit(uint64_t bytes, bool allow_cgroup) : bytes_(bytes) {
  if (bytes == 0) return;
  method_ = LimitMethod::kRlimitAs;
  if (!allow_cgroup) {
    fallback_reason_ = "cgroup v2 not tried";
    return;
  }
#if !defined(__linux__)
  // No cgroups outside Linux: RLIMIT_AS is what remains (which macOS may not
  // enforce: the report names the method either way).
  fallback_reason_ = "cgroup v2 is Linux-only";
  return;
#endif
  const std::string mount = cgroup2_mount();
  const std::string own = own_cgroup2_path();
  if (mount.empty() || own.empty()) {
    fallback_reason_ = "no cgroup v2 hierarchy";
    return;
  }
  const std::string dir = mount + (own == "/" ? "" : own);
  if (!has_word(read_text(dir + "/cgroup.controllers"), "memory")) {
    fallback_reason_ = "cgroup v2 at " + dir + " has no memory controller";
    return;
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    fallback_reason_ = "cgroup v2 at " + dir + " is not writable";
    return;
  }
  // Children of our group get memory.max only if the memory controller is
  // already enabled for the subtree (delegated). We never enable it
  // ourselves: at the root that would change the machine's configuration,
  // elsewhere the kernel refuses it for a group that holds processes.
  if (!has_word(read_text(dir + "/cgroup.subtree_control"), "memory")) {
    fallback_reason_ = "memory controller not delegated below " + dir;
    return;
  }
  parent_dir_ = dir;
  method_ = LimitMethod::kCgroupV2;
}

MemoryLimit::~MemoryLimit() = default;

std::string MemoryLimit::prepare_child_cgroup() {
  if (method_ != LimitMethod::kCgroupV2) return {};
  const std::string dir = parent_dir_ + "/turbokv-bench-" + std::to_string(::getpid()) + "-" +
                          std::to_string(next_child_++);
  if (::mkdir(dir.c_str(), 0755) != 0 || !write_text(dir + "/memory.max", std::to_string(bytes_))) {
    std::error_code ec;
    fs::remove(dir, ec);
    // Fall back for this and later children; the report says why.
    method_ = LimitMethod::kRlimitAs;
    fallback_reason_ = "could not create a cgroup under " + parent_dir_;
    return {};
  }
  write_text(dir + "/memory.swap.max", "0");  // may be absent without swap accounting
  return dir + "/cgroup.procs";
}

bool MemoryLimit::finish_child_cgroup(const std::string& procs_path) {
  if (procs_path.empty()) return false;
  const std::string dir = fs::path(procs_path).parent_path().string();
  bool oom = false;
  std::istringstream events(read_text(dir + "/memory.events"));
  std::string key;
  uint64_t value = 0;
  while (events >> key >> value)
    if (key == "oom_kill" && value > 0) oom = true;
  ::rmdir(dir.c_str());
  return oom;
}

}  // namespace tkv::bench
