#include "cli_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "test_util.h"

namespace tkv::test {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

std::vector<std::string> CliResult::err_lines() const {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < err.size()) {
    size_t nl = err.find('\n', start);
    if (nl == std::string::npos) nl = err.size();
    lines.push_back(err.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

CliProcess::CliProcess(const std::vector<std::string>& args, const std::string& stdout_path,
                       bool stderr_on_terminal) {
  const std::string binary = turbokv_binary();
  if (!std::filesystem::exists(binary)) {
    ADD_FAILURE() << "turbokv binary not found at " << binary << " (build the turbokv target)";
    return;
  }
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe(in_pipe) || pipe(out_pipe) || pipe(err_pipe)) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return;
  }
  // The terminal's slave side is opened here, before the fork, so that the
  // master reads end (EIO) only once the child, its last holder, exits.
  int pty_master = -1, pty_slave = -1;
  if (stderr_on_terminal) {
    pty_master = posix_openpt(O_RDWR | O_NOCTTY);
    if (pty_master < 0 || grantpt(pty_master) || unlockpt(pty_master) ||
        (pty_slave = open(ptsname(pty_master), O_RDWR | O_NOCTTY)) < 0) {
      ADD_FAILURE() << "pseudo-terminal: " << std::strerror(errno);
      return;
    }
    termios raw;
    tcgetattr(pty_slave, &raw);
    cfmakeraw(&raw);
    tcsetattr(pty_slave, TCSANOW, &raw);
  }
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return;
  }
  if (pid == 0) {
    dup2(in_pipe[0], 0);
    if (stdout_path.empty()) {
      dup2(out_pipe[1], 1);
    } else {
      const int fd = open(stdout_path.c_str(), O_WRONLY);
      if (fd < 0) _exit(126);
      dup2(fd, 1);
      close(fd);
    }
    dup2(pty_slave >= 0 ? pty_slave : err_pipe[1], 2);
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1],
                   pty_master, pty_slave})
      if (fd >= 0) close(fd);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  // Writing to a child that has exited must not kill the test with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  pid_ = pid;
  in_fd_ = in_pipe[1];
  out_fd_ = out_pipe[0];
  err_fd_ = err_pipe[0];
  if (pty_master >= 0) {
    close(pty_slave);
    close(err_fd_);
    err_fd_ = pty_master;
  }
}

CliProcess::~CliProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    finish(10);
  }
  for (int fd : {in_fd_, out_fd_, err_fd_})
    if (fd >= 0) close(fd);
}

void CliProcess::write_stdin(const std::string& text) {
  size_t written = 0;
  while (in_fd_ >= 0 && written < text.size()) {
    // Keep reading the outputs so that a chatty child never blocks us.
    pollfd fds[3] = {{in_fd_, POLLOUT, 0}, {out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    if (poll(fds, 3, 1000) < 0 && errno != EINTR) break;
    if (fds[0].revents & (POLLERR | POLLHUP)) break;  // the child closed its stdin
    if (fds[0].revents & POLLOUT) {
      const ssize_t w = write(in_fd_, text.data() + written, text.size() - written);
      if (w < 0 && errno != EINTR && errno != EAGAIN) break;
      if (w > 0) written += size_t(w);
    }
    if ((fds[1].revents | fds[2].revents) & (POLLIN | POLLHUP)) pump(0);
  }
}

void CliProcess::close_stdin() {
  if (in_fd_ >= 0) close(in_fd_);
  in_fd_ = -1;
}

bool CliProcess::pump(int timeout_ms) {
  if (out_fd_ < 0 && err_fd_ < 0) return false;
  pollfd fds[2];
  int n = 0;
  if (out_fd_ >= 0) fds[n++] = {out_fd_, POLLIN, 0};
  if (err_fd_ >= 0) fds[n++] = {err_fd_, POLLIN, 0};
  if (poll(fds, nfds_t(n), timeout_ms) < 0) return errno == EINTR;
  for (int i = 0; i < n; ++i) {
    if (!fds[i].revents) continue;
    char buf[65536];
    const ssize_t r = read(fds[i].fd, buf, sizeof buf);
    const bool is_out = fds[i].fd == out_fd_;
    if (r > 0) {
      (is_out ? result_.out : result_.err).append(buf, size_t(r));
    } else if (r == 0 || errno != EINTR) {
      close(fds[i].fd);
      (is_out ? out_fd_ : err_fd_) = -1;
    }
  }
  return out_fd_ >= 0 || err_fd_ >= 0;
}

bool CliProcess::wait_for(const std::string& text, bool in_stderr, double timeout_s) {
  const double end = now_s() + timeout_s;
  while (true) {
    if ((in_stderr ? result_.err : result_.out).find(text) != std::string::npos) return true;
    if (now_s() > end || !pump(50)) break;
  }
  return (in_stderr ? result_.err : result_.out).find(text) != std::string::npos;
}

bool CliProcess::wait_exit(double timeout_s) {
  const double end = now_s() + timeout_s;
  while (pump(50))
    if (now_s() > end) return false;
  return true;
}

void CliProcess::send_signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

CliResult CliProcess::finish(double timeout_s) {
  close_stdin();
  const double end = now_s() + timeout_s;
  bool killed = false;
  while (pump(100)) {
    if (!killed && now_s() > end && pid_ > 0) {
      kill(pid_, SIGKILL);
      killed = true;
      ADD_FAILURE() << "turbokv did not finish within " << timeout_s << " s";
    }
  }
  if (pid_ > 0) {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    pid_ = -1;
  }
  return result_;
}

CliResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text) {
  CliProcess process(args);
  if (!process.running()) return {};
  process.write_stdin(stdin_text);
  return process.finish();
}

CliResult run_cli_stderr_on_terminal(const std::vector<std::string>& args) {
  CliProcess process(args, "", /*stderr_on_terminal=*/true);
  if (!process.running()) return {};
  return process.finish();
}

CliResult run_cli_stdout_to(const std::vector<std::string>& args, const std::string& stdout_path) {
  CliProcess process(args, stdout_path);
  if (!process.running()) return {};
  return process.finish();
}

std::string summary_field(const std::string& err, const std::string& key) {
  const std::string needle = "| " + key + " ";
  size_t at = err.find(needle);
  if (at == std::string::npos) {
    // The first field has no leading '|'.
    if (err.rfind(key + " ", 0) == 0)
      at = 0;
    else if ((at = err.find("\n" + key + " ")) != std::string::npos)
      at += 1;
    else
      return {};
    at += key.size() + 1;
  } else {
    at += needle.size();
  }
  const size_t end = err.find_first_of("|\n", at);
  std::string v = err.substr(at, end == std::string::npos ? std::string::npos : end - at);
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v;
}

}  // namespace tkv::test
