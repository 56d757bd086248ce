// A whole file, read-only in memory: mapped in place, or copied into
// private memory backed by transparent huge pages (model weights).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace tkv {

// How a MappedFile holds the file's bytes.
enum class FileMemory {
  // mmap of the file: its pages are the page cache's, shared with other
  // processes and dropped (then read again) under memory pressure.
  kMap,
  // Read into private anonymous memory, 2 MiB-aligned and advised as
  // transparent huge pages (MADV_HUGEPAGE), then made read-only. A pass
  // over gigabytes of weights then needs one TLB entry per 2 MiB instead of
  // one per 4 KiB, and a kernel that samples page access bits (DAMON) has
  // 512 times fewer pages to walk, so it no longer stalls the decode
  // (docs/SERVER.md, "Weights in huge pages"). Costs a read of the file at
  // load and a private copy (no sharing between processes); its pages are
  // not dropped under pressure.
  kCopy,
};

// "mapped" or "read into 2 MiB pages", for logs.
const char* describe(FileMemory memory);

class MappedFile {
 public:
  MappedFile() = default;
  // Throws tkv::Error naming the path when it cannot be opened, mapped,
  // read or allocated.
  explicit MappedFile(const std::string& path, FileMemory memory = FileMemory::kMap);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  FileMemory memory() const { return memory_; }

  // kCopy only: calls fn with the copy's bytes writable, read-only again
  // after it (also when it throws), so that a loader can reorder them in
  // place before anything reads them (the model's F16 weights into row
  // blocks, tensor/matmul.h).
  void rewrite(const std::function<void(uint8_t* bytes)>& fn);

 private:
  void reset();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  FileMemory memory_ = FileMemory::kMap;
  // The mapping to unmap: the file's (data_, size_), or the anonymous one
  // that holds the 2 MiB-aligned copy.
  void* region_ = nullptr;
  size_t region_bytes_ = 0;
};

// Whether the kernel gives transparent huge pages to memory advised with
// MADV_HUGEPAGE: /sys/kernel/mm/transparent_hugepage/enabled is "always" or
// "madvise" (false where it is "never" or absent).
bool transparent_huge_pages_available();

// Maps every page of [begin, begin + bytes) (a range of a read-only file
// mapping) now, reading the file where its pages are not cached, so that the
// code that reads the range next does not take a page fault per page. The
// first pass over a model's weights otherwise pays one fault per few pages:
// ~0.6 s of a 2.5 GB model's first prompt on a 2-core VM. The kernel is asked
// to populate the range in one call (MADV_POPULATE_READ, Linux 5.14+), then
// one byte of each page is read: under shadow paging (some hypervisors) a
// populated page still traps on its first access, and where the call is not
// supported the reads fault the pages in.
void fault_in(const void* begin, size_t bytes);

}  // namespace tkv
