// Memory figures of the running process, as the kernel accounts them, for
// the cells of the memory protocol:
//   - peak RSS (VmHWM) and current RSS (VmRSS) from /proc/self/status;
//   - resident bytes of the model's file in memory (a mapping of the file,
//     or the huge-page copy: model::WeightMemory), the Rss of the mapping
//     that holds its bytes in /proc/self/smaps: "model bytes actually
//     resident";
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
  uint64_t model_resident = 0;  // Rss of the mapping that holds the model's bytes now
};

// model_bytes: any address in the model file's bytes (nullptr: no model).
MemorySnapshot memory_snapshot(const void* model_bytes);

// Resets VmHWM to the current RSS. Returns false where the kernel refuses
// (then the peak keeps counting from process start).
bool reset_peak_rss();

Json to_json(const MemorySnapshot& s);

}  // namespace tkv::bench
