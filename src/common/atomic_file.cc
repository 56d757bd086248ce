#include "common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/fault_points.h"

namespace tkv {

AtomicFileWriter::AtomicFileWriter(const std::string& path)
    : path_(path), tmp_path_(path + ".tmp." + std::to_string(::getpid())) {
  // Read before the temporary file exists: a test that sees the file may
  // change the fault points at once, and this writer must keep what it read.
  const FaultPoints faults = fault_points();
  fault_fail_ = faults.cache_write_fail;
  fault_pause_ms_ = faults.cache_write_pause_ms;
  f_ = std::fopen(tmp_path_.c_str(), "wb");
  if (!f_) fail(path, ": cannot create: ", std::strerror(errno));
}

void AtomicFileWriter::maybe_pause() {
  if (fault_pause_ms_ < 0) return;
  std::fflush(f_);
  std::this_thread::sleep_for(std::chrono::milliseconds(fault_pause_ms_));
  fault_pause_ms_ = -1;
}

AtomicFileWriter::~AtomicFileWriter() {
  if (f_) std::fclose(f_);
  if (!committed_) std::remove(tmp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t n) {
  if (n == 0) return;
  if (fault_fail_)
    fail(path_, ": write failed: ", std::strerror(ENOSPC), " (fault point: cache write)");
  if (std::fwrite(data, 1, n, f_) != n) fail(path_, ": write failed: ", std::strerror(errno));
  written_ += n;
  if (written_ >= 4096) maybe_pause();
}

void AtomicFileWriter::finish() {
  if (!f_) return;
  maybe_pause();
  if (std::fflush(f_) != 0) fail(path_, ": write failed: ", std::strerror(errno));
  if (::fsync(::fileno(f_)) != 0) fail(path_, ": fsync failed: ", std::strerror(errno));
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0) fail(path_, ": close failed: ", std::strerror(errno));
}

void AtomicFileWriter::commit() {
  finish();
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    fail(path_, ": cannot rename into place: ", std::strerror(errno));
  committed_ = true;
}

void write_file_atomic(const std::string& path, std::string_view contents) {
  AtomicFileWriter w(path);
  w.write(contents);
  w.commit();
}

std::string read_file(const std::string& path) {
  // An ifstream opens a directory and reads it as empty: check first.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open: ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(path, ": read failed");
  return ss.str();
}

std::string read_input_file(const std::string& path) {
  if (path != "-") return read_file(path);
  std::string out;
  char buf[1 << 16];
  while (true) {
    const size_t n = std::fread(buf, 1, sizeof buf, stdin);
    out.append(buf, n);
    if (n < sizeof buf) break;
  }
  if (std::ferror(stdin)) fail("standard input: read failed: ", std::strerror(errno));
  return out;
}

void check_output_path(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  const std::string name = what.empty() ? path : what + ": " + path;
  if (path.empty()) fail(what.empty() ? "output path" : what, ": empty path");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st)) fail(name, ": is a directory (give a file name)");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const fs::file_status dst = fs::status(dir, ec);
  if (!fs::exists(dst)) fail(name, ": directory ", dir.string(), " does not exist");
  if (!fs::is_directory(dst)) fail(name, ": ", dir.string(), " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    fail(name, ": cannot write in ", dir.string(), ": ", std::strerror(errno));
  if (fs::exists(st) && ::access(path.c_str(), W_OK) != 0)
    fail(name, ": cannot write: ", std::strerror(errno));
}

}  // namespace tkv
