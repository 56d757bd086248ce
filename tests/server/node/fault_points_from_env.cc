// The one source turbokv-faults adds to the turbokv binary's: before main,
// it arms the fault points (common/fault_points.h) from the environment, so
// that the end-to-end tests can make a live server's disk fail. The shipped
// binary reads none of these variables.
//   TURBOKV_FAULT_CACHE_WRITE=fail      every cache file write fails (ENOSPC)
//   TURBOKV_FAULT_CACHE_WRITE=pause:MS  every cache file writer pauses MS ms
//                                       past its first 4 KiB
//   TURBOKV_FAULT_SPILL_WRITE=N         the N-th page write of each KV spill
//   TURBOKV_FAULT_SPILL_READ=N          file fails, or the N-th read back
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "common/fault_points.h"

namespace {

[[noreturn]] void bad(const char* name, const char* value) {
  std::fprintf(stderr, "turbokv-faults: %s=%s: not a fault this binary knows\n", name, value);
  std::exit(2);
}

const bool armed = [] {
  tkv::FaultPoints points;
  if (const char* v = std::getenv("TURBOKV_FAULT_CACHE_WRITE")) {
    const std::string_view f(v);
    if (f == "fail")
      points.cache_write_fail = true;
    else if (f.starts_with("pause:") && f.size() > 6)
      points.cache_write_pause_ms = std::atoi(v + 6);
    else
      bad("TURBOKV_FAULT_CACHE_WRITE", v);
  }
  if (const char* v = std::getenv("TURBOKV_FAULT_SPILL_WRITE"))
    points.spill_write_fail_at = std::atoll(v);
  if (const char* v = std::getenv("TURBOKV_FAULT_SPILL_READ"))
    points.spill_read_fail_at = std::atoll(v);
  tkv::set_fault_points(points);
  return true;
}();

}  // namespace
