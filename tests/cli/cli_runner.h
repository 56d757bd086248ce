// Runs the built `turbokv` binary as a subprocess for the CLI tests: feeds
// stdin, captures stdout and stderr separately, and returns the exit code.
#pragma once

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

// Runs turbokv_binary() with `args`; `stdin_text` is written to its stdin,
// which is then closed. Fails the current test (and returns exit_code -1)
// when the binary is missing or cannot be started.
CliResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text = "");

// The "| key VALUE" field of run's summary line ("prefill" -> "5 tok in ..."),
// or "" when absent.
std::string summary_field(const std::string& stderr_text, const std::string& key);

}  // namespace tkv::test
