#include "line_reader.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace tkv::cli {

LineReader::Status LineReader::read_line(std::string& line) {
  while (true) {
    if (const size_t nl = buffer_.find('\n'); nl != std::string::npos) {
      line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return Status::kLine;
    }
    if (eof_) {
      if (buffer_.empty()) return Status::kEndOfInput;
      line = std::move(buffer_);
      buffer_.clear();
      return Status::kLine;
    }
    // Wait in short slices and look at the flag between them: a Ctrl-C that
    // lands just before the wait (while a command's output was printed) is
    // seen too, not only one that interrupts a blocked read().
    if (interrupt_ && interrupt_->load()) return Status::kInterrupted;
    pollfd pfd = {fd_, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, interrupt_ ? 100 : -1);
    if (ready < 0 && errno != EINTR) fail("reading standard input: ", std::strerror(errno));
    if (ready <= 0) continue;
    char chunk[4096];
    const ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n > 0) {
      buffer_.append(chunk, size_t(n));
    } else if (n == 0) {
      eof_ = true;
    } else if (errno == EINTR) {
      if (interrupt_ && interrupt_->load()) return Status::kInterrupted;
    } else {
      fail("reading standard input: ", std::strerror(errno));
    }
  }
}

}  // namespace tkv::cli
