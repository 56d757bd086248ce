// Lines from standard input for the chat REPL, read with poll(2)/read(2) so
// that a Ctrl-C at the prompt (the SIGINT handler raises a flag) ends the wait
// instead of being retried silently, and so that it works the same on a
// terminal and on a pipe (tests).
#pragma once

#include <atomic>
#include <string>

namespace tkv::cli {

class LineReader {
 public:
  enum class Status { kLine, kEndOfInput, kInterrupted };

  // `interrupt`: the flag the SIGINT handler raises (may be null).
  explicit LineReader(int fd, const std::atomic<bool>* interrupt = nullptr)
      : fd_(fd), interrupt_(interrupt) {}

  // One line without its '\n' (a final line without '\n' counts too).
  Status read_line(std::string& line);

 private:
  int fd_;
  const std::atomic<bool>* interrupt_;
  std::string buffer_;
  bool eof_ = false;
};

}  // namespace tkv::cli
