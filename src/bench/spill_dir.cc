#include "bench/spill_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "common/error.h"
#include "kv/spill_file.h"

namespace tkv::bench {

namespace {

std::string temp_parent() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::temp_directory_path(ec);
  return ec ? std::string("/tmp") : p.string();
}

// The file system's answer through the disk tier's own page file (created
// and gone at once: it has no name).
bool dir_on_tmpfs(const std::string& dir) {
  bool on_tmpfs = false;
  kv::SpillFile probe(dir, on_tmpfs);
  return on_tmpfs;
}

}  // namespace

TempSpillDir::TempSpillDir() {
  std::string templ = temp_parent() + "/turbokv-spill-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr)
    fail("KV spill directory under ", temp_parent(), ": ", std::strerror(errno),
         " (set TMPDIR to a writable directory)");
  path_ = templ;
  try {
    on_tmpfs_ = dir_on_tmpfs(path_);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    throw;
  }
}

TempSpillDir::~TempSpillDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

SpillPlace probe_spill_place() {
  SpillPlace p;
  p.parent = temp_parent();
  try {
    p.on_tmpfs = dir_on_tmpfs(p.parent);
  } catch (const std::exception& e) {
    p.error = e.what();
  }
  return p;
}

Json to_json(const TempSpillDir& dir) {
  return {{"dir", dir.path()}, {"on_tmpfs", dir.on_tmpfs()}};
}

}  // namespace tkv::bench
