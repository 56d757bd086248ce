#include "cli_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "test_util.h"

namespace tkv::test {

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

CliResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text) {
  CliResult result;
  const std::string binary = turbokv_binary();
  if (!std::filesystem::exists(binary)) {
    ADD_FAILURE() << "turbokv binary not found at " << binary << " (build the turbokv target)";
    return result;
  }
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe(in_pipe) || pipe(out_pipe) || pipe(err_pipe)) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return result;
  }
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return result;
  }
  if (pid == 0) {
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
      close(fd);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  // Writing to a child that has exited must not kill the test with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);

  size_t written = 0;
  int in_fd = in_pipe[1];
  if (stdin_text.empty()) {
    close(in_fd);
    in_fd = -1;
  }
  int out_fd = out_pipe[0], err_fd = err_pipe[0];
  while (out_fd >= 0 || err_fd >= 0) {
    pollfd fds[3];
    int n = 0;
    if (in_fd >= 0) fds[n++] = {in_fd, POLLOUT, 0};
    if (out_fd >= 0) fds[n++] = {out_fd, POLLIN, 0};
    if (err_fd >= 0) fds[n++] = {err_fd, POLLIN, 0};
    if (poll(fds, nfds_t(n), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < n; ++i) {
      if (!fds[i].revents) continue;
      if (fds[i].fd == in_fd) {
        const ssize_t w = write(in_fd, stdin_text.data() + written, stdin_text.size() - written);
        if (w > 0) written += size_t(w);
        if (w < 0 && errno != EAGAIN) written = stdin_text.size();  // child closed stdin
        if (written == stdin_text.size()) {
          close(in_fd);
          in_fd = -1;
        }
        continue;
      }
      char buf[65536];
      const ssize_t r = read(fds[i].fd, buf, sizeof buf);
      std::string& sink = fds[i].fd == out_fd ? result.out : result.err;
      if (r > 0) {
        sink.append(buf, size_t(r));
      } else if (r == 0 || errno != EINTR) {
        close(fds[i].fd);
        (fds[i].fd == out_fd ? out_fd : err_fd) = -1;
      }
    }
  }
  if (in_fd >= 0) close(in_fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
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
