// Read-only memory map of a whole file (model weights are used in place).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tkv {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws tkv::Error naming the path when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void reset();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

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
