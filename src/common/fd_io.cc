#include "common/fd_io.h"

#include <unistd.h>

#include <cerrno>

namespace tkv {

ssize_t pread_full(int fd, void* data, size_t bytes, int64_t offset) {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n =
        ::pread(fd, static_cast<char*>(data) + done, bytes - done, off_t(offset) + off_t(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += size_t(n);
  }
  return ssize_t(done);
}

ssize_t pwrite_full(int fd, const void* data, size_t bytes, int64_t offset) {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pwrite(fd, static_cast<const char*>(data) + done, bytes - done,
                               off_t(offset) + off_t(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += size_t(n);
  }
  return ssize_t(done);
}

}  // namespace tkv
