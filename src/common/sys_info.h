// What the OS says about this process and machine: memory high-water marks
// (the honest peak-memory figure), CPU model and SIMD flags for reports.
#pragma once

#include <cstdint>
#include <string>

namespace tkv {

// Peak resident set size of this process in bytes: VmHWM from
// /proc/self/status on Linux (which the bench's peak reset can clear),
// rusage_peak_rss_bytes() elsewhere or where /proc is absent.
uint64_t peak_rss_bytes();
// getrusage(RUSAGE_SELF)'s ru_maxrss in bytes (Linux reports kilobytes,
// macOS bytes): the peak since the process started, never reset. 0 on error.
uint64_t rusage_peak_rss_bytes();
// Current resident set size in bytes (VmRSS on Linux, the Mach task's
// resident size on macOS; 0 where neither exists).
uint64_t current_rss_bytes();
// Total physical memory of the machine in bytes.
uint64_t total_memory_bytes();
// Resident bytes (Rss of /proc/self/smaps) of the mapping that contains
// address p: a mapped file's, or an anonymous region's; -1 where p is in no
// mapping or smaps is unreadable.
int64_t resident_bytes_of_mapping(const void* p);
// Memory the kernel estimates it can give without swapping (MemAvailable of
// /proc/meminfo: free plus reclaimable page cache), in bytes; 0 where unknown.
uint64_t available_memory_bytes();

struct CpuInfo {
  std::string model;  // "Intel(R) Xeon(R) ..."
  std::string flags;  // SIMD-relevant flags only, space separated: "avx2 fma avx512f ..."
  int logical_cpus = 1;
  int physical_cores = 1;
};
CpuInfo cpu_info();

// Formats a byte count for humans: "1.25 GiB", "512.0 KiB".
std::string format_bytes(uint64_t bytes);

// Parses a size with optional binary suffix: "16G", "512M", "1.5g", "4096".
// Throws tkv::Error on malformed input.
uint64_t parse_bytes(const std::string& text);

}  // namespace tkv
