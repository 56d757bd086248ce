// The disk tier of a page pool: one unnamed file in a spill directory that
// holds evicted pages, still compressed, in fixed slots. The file has no name
// (O_TMPFILE, or unlinked right after it is created where the file system
// lacks O_TMPFILE), so nothing is left behind however the process ends.
// Each slot's XXH3-64 checksum stays in RAM and is checked on every read.
// Not thread-safe by itself: PagePool serializes slot bookkeeping; reads and
// writes of distinct slots may run concurrently (pread / pwrite).
//
// Tests make the N-th page write or read back fail (common/fault_points.h:
// spill_*), read when the file is created.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"

namespace tkv::kv {

// The spill directory cannot be used, a page could not be written (disk
// full, I/O error) or read back (I/O error, checksum mismatch).
class KvSpillError : public Error {
 public:
  using Error::Error;
};

class SpillFile {
 public:
  // Creates the file in `dir`; throws KvSpillError naming the directory and
  // the reason (missing, not a directory, read-only, ...). `on_tmpfs` is set
  // when the directory is on tmpfs, whose "disk" is RAM.
  SpillFile(const std::string& dir, bool& on_tmpfs);
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  // A slot of `bytes` (reused from freed slots of that size, else appended).
  int64_t take_slot(size_t bytes);
  void free_slot(int64_t offset, size_t bytes);
  // Writes `bytes` at the slot; returns the checksum to keep. Throws
  // KvSpillError (disk full, I/O error).
  uint64_t write(int64_t offset, const uint8_t* data, size_t bytes);
  // Reads the slot back; throws KvSpillError on an I/O error or when the
  // bytes do not match `checksum`.
  void read(int64_t offset, uint8_t* data, size_t bytes, uint64_t checksum) const;

  uint64_t file_bytes() const { return end_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int fd_ = -1;
  uint64_t end_ = 0;
  std::map<size_t, std::vector<int64_t>> free_;
  // Fault injection (see above): 0 = off.
  int64_t fail_write_at_ = 0, fail_read_at_ = 0;
  std::atomic<int64_t> writes_{0};
  mutable std::atomic<int64_t> reads_{0};
};

}  // namespace tkv::kv
