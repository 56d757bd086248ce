// Files turbokv writes (GGUF from synth, session caches, reports) appear
// atomically: written to a temporary file in the same directory, fsynced, then
// renamed over the target. A crash leaves either the old file or the new one.
//
// Tests make writers fail or pause (common/fault_points.h: cache_write_*);
// a writer reads the fault points when it is opened, before its temporary
// file exists. In `turbokv serve` the writers are the prefix-cache files'.
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
  // Flushes, fsyncs and closes the temporary file without renaming it, so
  // that a group of files can all be written before any replaces its target
  // (commit() them afterwards); throws on any failure. Idempotent.
  void finish();
  // finish(), then renames into place; throws on any failure.
  void commit();

 private:
  std::string path_, tmp_path_;
  std::FILE* f_ = nullptr;
  uint64_t written_ = 0;
  bool committed_ = false;
  // The fault points read at opening (common/fault_points.h).
  bool fault_fail_ = false;
  int fault_pause_ms_ = -1;  // < 0: none, or already paused
  void maybe_pause();
};

// Convenience: atomically replaces `path` with `contents`.
void write_file_atomic(const std::string& path, std::string_view contents);

// Reads a whole file; throws tkv::Error naming the path on failure (missing,
// unreadable, a directory).
std::string read_file(const std::string& path);

// Reads a text the user named on the command line (a prompt file, -f): the
// whole file, or standard input when `path` is "-". tkv::Error naming the
// path for anything unreadable.
std::string read_input_file(const std::string& path);

// Checks, before any work, that `path` can be written as AtomicFileWriter
// writes it: not a directory, its directory exists and is writable (the
// temporary file goes there), and an existing file is writable. tkv::Error
// "<path>: <why>" otherwise; `what` names the flag or command for the
// message ("--out"), or is empty.
void check_output_path(const std::string& path, const std::string& what = {});

}  // namespace tkv
