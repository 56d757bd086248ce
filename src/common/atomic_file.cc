#include "common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace tkv {

AtomicFileWriter::AtomicFileWriter(const std::string& path)
    : path_(path), tmp_path_(path + ".tmp." + std::to_string(::getpid())) {
  f_ = std::fopen(tmp_path_.c_str(), "wb");
  if (!f_) fail(path, ": cannot create: ", std::strerror(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (f_) std::fclose(f_);
  if (!committed_) std::remove(tmp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t n) {
  if (n == 0) return;
  if (std::fwrite(data, 1, n, f_) != n) fail(path_, ": write failed: ", std::strerror(errno));
  written_ += n;
}

void AtomicFileWriter::commit() {
  if (std::fflush(f_) != 0) fail(path_, ": write failed: ", std::strerror(errno));
  if (::fsync(::fileno(f_)) != 0) fail(path_, ": fsync failed: ", std::strerror(errno));
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0) fail(path_, ": close failed: ", std::strerror(errno));
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
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open: ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(path, ": read failed");
  return ss.str();
}

}  // namespace tkv
