// Fault points: a test seam where the I/O of the prefix-cache files and of
// the KV disk tier can be made to fail as a full or failing disk would, so
// that tests reach the error paths without a broken disk. Nothing in the
// shipped program sets them (no environment variable arms them); tests set
// them with set_fault_points, and the test-only server binary
// (tests/server/faults) from its environment.
#pragma once

#include <cstdint>

namespace tkv {

struct FaultPoints {
  // Every AtomicFileWriter opened while set fails each write() as on a full
  // disk (ENOSPC).
  bool cache_write_fail = false;
  // >= 0: every AtomicFileWriter opened while set, once past its first
  // 4 KiB (or at finish(), for a smaller file), flushes what it has to its
  // temporary file and sleeps this many milliseconds, so that a test can
  // kill the process in the middle of a write.
  int cache_write_pause_ms = -1;
  // > 0: the N-th page write of every KV spill file created while set fails
  // as on a full disk (the page stays in RAM).
  int64_t spill_write_fail_at = 0;
  // > 0: the N-th page read back of every such file fails as an I/O error.
  int64_t spill_read_fail_at = 0;
};

// The points now (none set unless a test set them). Each writer and spill
// file reads them once, when it is opened or created, and keeps what it read.
FaultPoints fault_points();
void set_fault_points(const FaultPoints& points);

}  // namespace tkv
