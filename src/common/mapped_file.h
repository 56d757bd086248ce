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

  // Asks the kernel to read the whole file ahead (weights are read every token).
  void advise_will_need() const;

 private:
  void reset();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tkv
