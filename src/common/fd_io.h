// Positioned reads and writes of a whole buffer on a file descriptor: the
// loop every caller would otherwise write around pread / pwrite (short
// transfers go on, EINTR is retried). Callers word their own errors.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace tkv {

// Reads `bytes` at `offset` into `data`. Returns the bytes read: `bytes`,
// or fewer where the file ends first; -1 with errno set on an error.
ssize_t pread_full(int fd, void* data, size_t bytes, int64_t offset);
// Writes `bytes` from `data` at `offset`. Returns the bytes written:
// `bytes`, or fewer where a write took none (a full device); -1 with errno
// set on an error.
ssize_t pwrite_full(int fd, const void* data, size_t bytes, int64_t offset);

}  // namespace tkv
