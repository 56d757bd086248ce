// Files turbokv writes (GGUF from synth, session caches, reports) appear
// atomically: written to a temporary file in the same directory, fsynced, then
// renamed over the target. A crash leaves either the old file or the new one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace tkv {

class AtomicFileWriter {
 public:
  // Opens "<path>.tmp.<pid>" for writing; throws tkv::Error on failure.
  explicit AtomicFileWriter(const std::string& path);
  ~AtomicFileWriter();  // removes the temporary file unless commit() ran
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  uint64_t bytes_written() const { return written_; }
  // Flushes, fsyncs and renames into place; throws on any failure.
  void commit();

 private:
  std::string path_, tmp_path_;
  std::FILE* f_ = nullptr;
  uint64_t written_ = 0;
  bool committed_ = false;
};

// Convenience: atomically replaces `path` with `contents`.
void write_file_atomic(const std::string& path, std::string_view contents);

// Reads a whole file; throws tkv::Error naming the path on failure.
std::string read_file(const std::string& path);

}  // namespace tkv
