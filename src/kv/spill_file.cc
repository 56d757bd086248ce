#include "kv/spill_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>

#include "common/fault_points.h"
#include "common/fd_io.h"

namespace tkv::kv {

namespace {
constexpr long kTmpfsMagic = 0x01021994;  // TMPFS_MAGIC (linux/magic.h)
}  // namespace

SpillFile::SpillFile(const std::string& dir, bool& on_tmpfs) : dir_(dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw KvSpillError(str("KV spill directory ", dir, ": ", std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    throw KvSpillError(str("KV spill directory ", dir, ": not a directory"));
  fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd_ < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    // No O_TMPFILE on this file system: a named file, unlinked at once.
    std::string path = dir + "/turbokv-spill-XXXXXX";
    fd_ = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd_ >= 0) ::unlink(path.c_str());
  }
  if (fd_ < 0)
    throw KvSpillError(
        str("KV spill directory ", dir, ": cannot create the page file: ", std::strerror(errno)));
  struct statfs fs {};
  on_tmpfs = ::fstatfs(fd_, &fs) == 0 && long(fs.f_type) == kTmpfsMagic;
  const FaultPoints faults = fault_points();
  fail_write_at_ = faults.spill_write_fail_at;
  fail_read_at_ = faults.spill_read_fail_at;
}

SpillFile::~SpillFile() {
  if (fd_ >= 0) ::close(fd_);
}

int64_t SpillFile::take_slot(size_t bytes) {
  auto it = free_.find(bytes);
  if (it != free_.end() && !it->second.empty()) {
    const int64_t off = it->second.back();
    it->second.pop_back();
    return off;
  }
  const int64_t off = int64_t(end_);
  end_ += bytes;
  return off;
}

void SpillFile::free_slot(int64_t offset, size_t bytes) {
  if (offset >= 0) free_[bytes].push_back(offset);
}

uint64_t SpillFile::write(int64_t offset, const uint8_t* data, size_t bytes) {
  if (fail_write_at_ > 0 && ++writes_ == fail_write_at_)
    throw KvSpillError(str("KV spill: cannot write a page to ", dir_, ": ", std::strerror(ENOSPC),
                           " (fault point: spill write)"));
  const ssize_t n = pwrite_full(fd_, data, bytes, offset);
  if (n != ssize_t(bytes))
    throw KvSpillError(str("KV spill: cannot write a page to ", dir_, ": ",
                           n < 0 ? std::strerror(errno) : "no space left"));
  return XXH3_64bits(data, bytes);
}

void SpillFile::read(int64_t offset, uint8_t* data, size_t bytes, uint64_t checksum) const {
  if (fail_read_at_ > 0 && ++reads_ == fail_read_at_)
    throw KvSpillError(str("KV spill: cannot read a page back from ", dir_, ": ",
                           std::strerror(EIO), " (fault point: spill read)"));
  const ssize_t n = pread_full(fd_, data, bytes, offset);
  if (n != ssize_t(bytes))
    throw KvSpillError(str("KV spill: cannot read a page back from ", dir_, ": ",
                           n < 0 ? std::strerror(errno) : "file too short"));
  if (XXH3_64bits(data, bytes) != checksum)
    throw KvSpillError(str("KV spill: a page read back from ", dir_,
                           " does not match its checksum (the page file was corrupted)"));
}

}  // namespace tkv::kv
