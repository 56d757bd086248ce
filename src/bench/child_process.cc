#include "bench/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "bench/interrupt.h"
#include "common/error.h"
#include "common/timer.h"

namespace tkv::bench {

namespace {

constexpr size_t kErrTailBytes = 64 * 1024;

// Only async-signal-safe calls between fork and exec: the parent has threads.
[[noreturn]] void child_fail(int err_fd, const char* what) {
  const int e = errno;
  const char* msg = strerror(e);  // not strictly safe, but the child exits right after
  (void)!::write(err_fd, "turbokv bench: cell start failed: ", 34);
  (void)!::write(err_fd, what, strlen(what));
  (void)!::write(err_fd, ": ", 2);
  (void)!::write(err_fd, msg, strlen(msg));
  (void)!::write(err_fd, "\n", 1);
  ::_exit(e == ENOMEM ? 126 : 127);
}

void close_pair(int fds[2]) {
  for (int i = 0; i < 2; ++i)
    if (fds[i] >= 0) ::close(fds[i]);
}

// The child's side of the fork: its pipes as stdout and stderr, then the
// cgroup, working directory and address-space limit, then the exec. Only
// async-signal-safe calls (the parent has threads), so `cargv` is built
// before the fork.
[[noreturn]] void exec_child(const std::vector<char*>& cargv, const int out_pipe[2],
                             const int err_pipe[2], const ChildLimits& limits) {
  ::dup2(out_pipe[1], STDOUT_FILENO);
  ::dup2(err_pipe[1], STDERR_FILENO);
  if (!limits.cgroup_procs.empty()) {
    const int fd = ::open(limits.cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) != 1) child_fail(STDERR_FILENO, "joining the cgroup");
    ::close(fd);
  }
  if (!limits.working_dir.empty() && ::chdir(limits.working_dir.c_str()) != 0)
    child_fail(STDERR_FILENO, "chdir");
  if (limits.address_space_bytes > 0) {
    const rlimit rl{limits.address_space_bytes, limits.address_space_bytes};
    if (::setrlimit(RLIMIT_AS, &rl) != 0) child_fail(STDERR_FILENO, "setrlimit(RLIMIT_AS)");
  }
  ::execv(cargv[0], cargv.data());
  child_fail(STDERR_FILENO, "exec");
}

// Reads the child's stdout and stderr until both close, keeping the tail
// of stderr only; kills it (and says why in `r`) on an interrupt or at the
// timeout. Closes both descriptors.
void collect_output(pid_t pid, int out_fd, int err_fd, const ChildLimits& limits,
                    const Stopwatch& clock, ChildResult& r) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  int open_fds = 2;
  char buf[16384];
  while (open_fds > 0) {
    if (limits.stop_on_interrupt && interrupt_signal() != 0) {
      ::kill(pid, SIGKILL);
      r.interrupted = true;
      break;
    }
    // The signal may land on another thread, or just before poll(): wake
    // up now and then to look at the flag.
    int wait_ms = limits.stop_on_interrupt ? 100 : -1;
    if (limits.timeout_seconds > 0) {
      const double left = limits.timeout_seconds - clock.seconds();
      if (left <= 0) {
        ::kill(pid, SIGKILL);
        r.timed_out = true;
        break;
      }
      const int timeout_ms = int(left * 1000) + 1;
      wait_ms = wait_ms < 0 ? timeout_ms : std::min(wait_ms, timeout_ms);
    }
    const int n = ::poll(fds, 2, wait_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      std::string& dst = i == 0 ? r.out : r.err;
      dst.append(buf, size_t(got));
      if (i == 1 && dst.size() > 2 * kErrTailBytes) dst.erase(0, dst.size() - kErrTailBytes);
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
}

// Waits for the child and records how it ended.
void reap_child(pid_t pid, const Stopwatch& clock, ChildResult& r) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.seconds = clock.seconds();
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
    r.exec_failed = (r.exit_code == 126 || r.exit_code == 127) &&
                    r.err.find("turbokv bench: cell start failed: ") != std::string::npos;
  } else if (WIFSIGNALED(status)) {
    r.term_signal = WTERMSIG(status);
  }
}

}  // namespace

std::string self_executable() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) fail("cannot resolve /proc/self/exe: ", ec.message());
  return p.string();
}

ChildResult run_child(const std::vector<std::string>& argv, const ChildLimits& limits) {
  TKV_CHECK(!argv.empty());
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    close_pair(out_pipe);
    fail("bench: cannot create pipes for a cell: ", std::strerror(errno));
  }
  Stopwatch clock;
  const pid_t pid = ::fork();
  if (pid < 0) {
    close_pair(out_pipe);
    close_pair(err_pipe);
    fail("bench: cannot fork a cell: ", std::strerror(errno));
  }
  if (pid == 0) exec_child(cargv, out_pipe, err_pipe, limits);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);

  ChildResult r;
  collect_output(pid, out_pipe[0], err_pipe[0], limits, clock, r);
  reap_child(pid, clock, r);
  if (r.err.size() > kErrTailBytes) r.err.erase(0, r.err.size() - kErrTailBytes);
  return r;
}

}  // namespace tkv::bench
