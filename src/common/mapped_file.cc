#include "common/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "common/error.h"
#include "common/fd_io.h"

namespace tkv {

namespace {

constexpr size_t kHugePage = size_t(2) << 20;

// The file read into fresh anonymous memory whose start is 2 MiB-aligned
// (a huge page can only back an aligned 2 MiB range), advised as huge
// pages, then made read-only so that a stray write faults as it would on a
// mapping of the file. Sets `region` / `region_bytes` to the whole mapping
// (alignment slack included) and returns the aligned start.
uint8_t* read_into_huge_pages(int fd, size_t size, const std::string& path, void*& region,
                              size_t& region_bytes) {
  const size_t rounded = (size + kHugePage - 1) / kHugePage * kHugePage;
  region_bytes = rounded + kHugePage;
  region =
      ::mmap(nullptr, region_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) {
    region = nullptr;
    fail(path, ": cannot allocate ", size, " bytes to read it into: ", std::strerror(errno));
  }
  uint8_t* at = reinterpret_cast<uint8_t*>((uintptr_t(region) + kHugePage - 1) & ~(kHugePage - 1));
#ifdef MADV_HUGEPAGE
  // Best effort: where THP is off the copy is in ordinary pages.
  (void)::madvise(at, rounded, MADV_HUGEPAGE);
#endif
  const ssize_t n = pread_full(fd, at, size, 0);
  if (n < 0) fail(path, ": cannot read: ", std::strerror(errno));
  if (size_t(n) < size) fail(path, ": the file shrank to ", n, " bytes while it was read");
  (void)::mprotect(at, rounded, PROT_READ);
  return at;
}

}  // namespace

void MappedFile::rewrite(const std::function<void(uint8_t* bytes)>& fn) {
  TKV_CHECK(memory_ == FileMemory::kCopy);
  if (size_ == 0) return;
  auto* bytes = const_cast<uint8_t*>(data_);
  const size_t rounded = (size_ + kHugePage - 1) / kHugePage * kHugePage;
  if (::mprotect(bytes, rounded, PROT_READ | PROT_WRITE) != 0)
    fail(path_, ": cannot make the copy writable: ", std::strerror(errno));
  struct ReadOnlyAgain {
    void* at;
    size_t n;
    ~ReadOnlyAgain() { (void)::mprotect(at, n, PROT_READ); }
  } again{bytes, rounded};
  fn(bytes);
}

const char* describe(FileMemory memory) {
  return memory == FileMemory::kCopy ? "read into 2 MiB pages" : "mapped";
}

bool transparent_huge_pages_available() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(in, line)) return false;
  return line.find("[always]") != std::string::npos || line.find("[madvise]") != std::string::npos;
}

MappedFile::MappedFile(const std::string& path, FileMemory memory) : path_(path), memory_(memory) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    fail(path, ": cannot stat: ", std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, ": not a regular file");
  }
  size_ = size_t(st.st_size);
  if (size_ > 0 && memory == FileMemory::kCopy) {
    try {
      data_ = read_into_huge_pages(fd, size_, path, region_, region_bytes_);
    } catch (...) {
      ::close(fd);
      reset();
      throw;
    }
  } else if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      fail(path, ": cannot mmap: ", std::strerror(e));
    }
    data_ = static_cast<const uint8_t*>(p);
    region_ = p;
    region_bytes_ = size_;
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  reset();
}

MappedFile::MappedFile(MappedFile&& o) noexcept {
  *this = std::move(o);
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    reset();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    memory_ = o.memory_;
    region_ = std::exchange(o.region_, nullptr);
    region_bytes_ = std::exchange(o.region_bytes_, 0);
  }
  return *this;
}

void MappedFile::reset() {
  if (region_) ::munmap(region_, region_bytes_);
  region_ = nullptr;
  region_bytes_ = 0;
  data_ = nullptr;
  size_ = 0;
}

void fault_in(const void* begin, size_t bytes) {
  if (bytes == 0) return;
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = uintptr_t(begin) & ~(page - 1);
  const uintptr_t end = uintptr_t(begin) + bytes;
#ifdef MADV_POPULATE_READ
  // Best effort: EINVAL on older kernels, and the reads below do the work.
  (void)::madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_READ);
#endif
  // A volatile read is never elided.
  for (uintptr_t p = first; p < end; p += page)
    (void)*reinterpret_cast<const volatile uint8_t*>(std::max(p, uintptr_t(begin)));
}

}  // namespace tkv
