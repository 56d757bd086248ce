// The spill directory of a cell whose KV item has a RAM cap (budgetSIZE): a
// fresh directory under the system's temporary directory ($TMPDIR, else
// /tmp), removed with everything in it when the cell ends. The page file
// inside has no name (kv/spill_file.h), so a cell that dies leaves at most
// an empty directory behind.
#pragma once

#include <string>

#include "bench/json.h"

namespace tkv::bench {

class TempSpillDir {
 public:
  // Creates "turbokv-spill-XXXXXX" under the temporary directory; tkv::Error
  // naming it when it cannot.
  TempSpillDir();
  ~TempSpillDir();
  TempSpillDir(const TempSpillDir&) = delete;
  TempSpillDir& operator=(const TempSpillDir&) = delete;

  const std::string& path() const { return path_; }
  // The directory is on tmpfs, whose "disk" is RAM: spilled pages still take
  // RAM (peak RSS does not show it, the machine's memory does).
  bool on_tmpfs() const { return on_tmpfs_; }

 private:
  std::string path_;
  bool on_tmpfs_ = false;
};

// Where TempSpillDir would go, and whether that is tmpfs (for a note before
// a run); `error` says why when the directory cannot hold a page file.
struct SpillPlace {
  std::string parent;
  bool on_tmpfs = false;
  std::string error;  // why it cannot be used, or ""
};
SpillPlace probe_spill_place();

// {"dir", "on_tmpfs"} for result rows.
Json to_json(const TempSpillDir& dir);

}  // namespace tkv::bench
