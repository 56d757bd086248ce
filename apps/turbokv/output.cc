#include "output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.h"

namespace tkv::cli {

namespace {

bool g_mid_line = false;  // the last byte written to stdout was not '\n'

[[noreturn]] void stdout_failed(int err) {
  throw StdoutError(str("cannot write to standard output: ", std::strerror(err)));
}

}  // namespace

void write_stdout(std::string_view text) {
  if (text.empty()) return;
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
    stdout_failed(errno ? errno : EIO);
  g_mid_line = text.back() != '\n';
}

void flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) stdout_failed(errno ? errno : EIO);
}

void end_stdout_line() {
  if (g_mid_line) write_stdout("\n");
}

}  // namespace tkv::cli
