// Standard output of the commands. Everything a command prints on stdout goes
// through write_stdout(), which checks every write: a full disk or a closed
// pipe (`> /dev/full`) is an error, not a silently truncated output. It also
// remembers whether stdout ends mid-line, so that a message on stderr (an
// error after streaming started, run's summary) starts on a line of its own.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace tkv::cli {

// Standard output could not be written. main() prints one line and exits 1
// (the machine's fault, not the user's input).
class StdoutError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Writes `text` and flushes (streamed tokens are seen as they come);
// StdoutError on failure.
void write_stdout(std::string_view text);
// Flushes whatever stdio buffered (e.g. help printed with fputs);
// StdoutError if an earlier or this write failed.
void flush_stdout();
// Ends a line left open on stdout (streamed text without a final newline),
// so that what follows on stderr starts at the beginning of a line.
void end_stdout_line();

}  // namespace tkv::cli
