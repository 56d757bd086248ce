// Memory figures of the running process, as the kernel accounts them, for
// the cells of the memory protocol:
//   - peak RSS (VmHWM) and current RSS (VmRSS) from /proc/self/status;
//   - resident bytes of one memory-mapped file (the model), the sum of the
//     Rss of its mappings in /proc/self/smaps: "model bytes actually resident";
//   - the peak can be reset (writing 5 to /proc/self/clear_refs, Linux >= 4.0)
//     so that prefill and decode get a peak each.
// Elsewhere (macOS) the RSS figures come from sys_info's getrusage / Mach
// fallbacks, model_resident is 0 and the peak cannot be reset.
#pragma once

#include <cstdint>
#include <string>

#include "bench/json.h"

namespace tkv::bench {

struct MemorySnapshot {
  uint64_t peak_rss = 0;        // VmHWM since start or the last reset_peak_rss()
  uint64_t rss = 0;             // VmRSS now
  uint64_t model_resident = 0;  // Rss of the model file's mappings now
};

// Resident bytes of every mapping of `path` (compared after realpath); 0 when
// the file is not mapped or /proc is unavailable.
uint64_t mapped_file_resident_bytes(const std::string& path);

MemorySnapshot memory_snapshot(const std::string& model_path);

// Resets VmHWM to the current RSS. Returns false where the kernel refuses
// (then the peak keeps counting from process start).
bool reset_peak_rss();

Json to_json(const MemorySnapshot& s);

}  // namespace tkv::bench
