// Runs the built `turbokv` binary as a subprocess for the CLI tests: feeds
// stdin, captures stdout and stderr separately, and returns the exit code.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace tkv::test {

struct CliResult {
  int exit_code = -1;  // 128 + signal number when killed by a signal
  std::string out;     // stdout
  std::string err;     // stderr

  // Lines of stderr (without the '\n').
  std::vector<std::string> err_lines() const;
};

// A running turbokv process with pipes on stdin, stdout and stderr, for tests
// that interact with it (e.g. Ctrl-C while chat generates).
class CliProcess {
 public:
  // Starts turbokv_binary() with `args`. Fails the current test when it
  // cannot be started (running() is false then). With `stdout_path`, stdout
  // goes to that file (e.g. /dev/full) instead of the pipe. With
  // `stderr_on_terminal`, stderr is a pseudo-terminal (raw: no newline
  // translation) read like the pipe, for what turbokv draws on terminals.
  explicit CliProcess(const std::vector<std::string>& args, const std::string& stdout_path = "",
                      bool stderr_on_terminal = false);
  ~CliProcess();  // kills the process if it still runs
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;

  bool running() const { return pid_ > 0; }
  void write_stdin(const std::string& text);
  void close_stdin();
  // Collects output until `text` appears in stdout (or in stderr when
  // `in_stderr`) or `timeout_s` passes; true when it appeared.
  bool wait_for(const std::string& text, bool in_stderr, double timeout_s);
  void send_signal(int sig);
  // Collects output until the process closes stdout and stderr (it exited),
  // without closing its stdin; false after `timeout_s`.
  bool wait_exit(double timeout_s);
  // Closes stdin, collects the rest of the output and the exit code; a process
  // still running after `timeout_s` is killed (exit code 128 + 9).
  CliResult finish(double timeout_s = 300);

 private:
  // Reads what is available within `timeout_ms`; false when both outputs are closed.
  bool pump(int timeout_ms);

  pid_t pid_ = -1;
  int in_fd_ = -1, out_fd_ = -1, err_fd_ = -1;
  CliResult result_;
};

// Runs turbokv_binary() with `args`; `stdin_text` is written to its stdin,
// which is then closed.
CliResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text = "");
// Runs turbokv_binary() with `args` and its stderr on a pseudo-terminal.
CliResult run_cli_stderr_on_terminal(const std::vector<std::string>& args);
// Runs turbokv_binary() with `args` and its stdout opened on `stdout_path`.
CliResult run_cli_stdout_to(const std::vector<std::string>& args, const std::string& stdout_path);

// The "| key VALUE" field of run's summary line ("prefill" -> "5 tok in ..."),
// or "" when absent.
std::string summary_field(const std::string& stderr_text, const std::string& key);

}  // namespace tkv::test
