// Runs one bench cell in a child process of the same binary, so that each
// measurement starts from a fresh address space (honest peak RSS) and a cell
// that runs out of memory or crashes cannot take the harness down with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tkv::bench {

struct ChildLimits {
  uint64_t address_space_bytes = 0;  // RLIMIT_AS set in the child before exec (0 = none)
  std::string cgroup_procs;          // cgroup.procs the child joins before exec ("" = none)
  double timeout_seconds = 0;        // SIGKILL after this long (0 = none)
  std::string working_dir;           // chdir there before exec ("" = inherit)
  bool stop_on_interrupt = false;    // SIGKILL it when interrupt_signal() is set (interrupt.h)
};

struct ChildResult {
  int exit_code = -1;   // when the child exited
  int term_signal = 0;  // when a signal ended it
  bool timed_out = false;
  bool interrupted = false;  // killed because the harness was interrupted
  bool exec_failed = false;  // the binary could not be started (errno text in err)
  std::string out, err;      // everything it wrote
  double seconds = 0;
};

// fork + execv(argv[0], argv). Reads stdout and stderr fully (err is kept to
// its last 64 KiB). Never throws for anything the child does; throws
// tkv::Error only when the pipes or the fork themselves fail.
ChildResult run_child(const std::vector<std::string>& argv, const ChildLimits& limits);

// Path of the running executable (/proc/self/exe resolved), for re-invoking
// ourselves.
std::string self_executable();

}  // namespace tkv::bench
