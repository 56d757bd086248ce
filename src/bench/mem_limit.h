// --mem-limit: how a cell's child process is kept under a memory limit.
//
// Preferred: a cgroup v2 child group with memory.max (the kernel counts what
// the process really uses -- anonymous memory plus the page cache it touches
// -- and its OOM killer ends the cell with SIGKILL, which memory.events
// records). That needs a writable cgroup v2 hierarchy with the memory
// controller delegated to our group; containers often lack it.
// Fallback: setrlimit(RLIMIT_AS) in the child before exec. Address space is
// not memory: it includes the whole memory-mapped model file (resident or
// not), thread stacks and the malloc arenas' reserves, so RLIMIT_AS trips
// earlier than a real OOM would; an allocation past it fails (std::bad_alloc,
// mmap ENOMEM) and the cell reports an OOM row. The report names the method.
#pragma once

#include <cstdint>
#include <string>

namespace tkv::bench {

enum class LimitMethod { kNone, kCgroupV2, kRlimitAs };
const char* limit_method_name(LimitMethod m);  // "none", "cgroup-v2 memory.max", "RLIMIT_AS"

class MemoryLimit {
 public:
  // bytes == 0: no limit. Otherwise probes for cgroup v2 (unless
  // allow_cgroup is false) and falls back to RLIMIT_AS.
  explicit MemoryLimit(uint64_t bytes, bool allow_cgroup = true);
  ~MemoryLimit();  // removes the cgroups it created
  MemoryLimit(const MemoryLimit&) = delete;
  MemoryLimit& operator=(const MemoryLimit&) = delete;

  uint64_t bytes() const { return bytes_; }
  LimitMethod method() const { return method_; }
  // Why cgroup v2 was not used (empty when it was, or with no limit).
  const std::string& fallback_reason() const { return fallback_reason_; }

  // For one child: a fresh cgroup (cgroup method) whose cgroup.procs path the
  // child writes "0" into before exec. Empty for the other methods.
  std::string prepare_child_cgroup();
  // After the child ended: whether the cgroup's OOM killer fired, then the
  // group is removed.
  bool finish_child_cgroup(const std::string& procs_path);

 private:
  uint64_t bytes_ = 0;
  LimitMethod method_ = LimitMethod::kNone;
  std::string fallback_reason_;
  std::string parent_dir_;  // our delegated cgroup v2 directory
  int next_child_ = 0;
};

}  // namespace tkv::bench
