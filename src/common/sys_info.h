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
// Where the resident memory of this process is now, by kind of mapping,
// from /proc/self/smaps (Linux; every field 0 elsewhere or when smaps is
// unreadable). The fields add up to `total`.
struct ResidentMemory {
  uint64_t total = 0;      // every mapping's Rss (what VmRSS says, to the kB)
  uint64_t region = 0;     // the mapping that contains the address asked about
  uint64_t files = 0;      // other file-backed mappings: the binary's and the shared
                           // libraries' code, read-only data and relocated data
  uint64_t stacks = 0;     // the main thread's stack and every thread's (an anonymous
                           // mapping right above its guard page)
  uint64_t anonymous = 0;  // the rest: the heap and anonymous mappings (malloc's)
};
// `in_region`: an address inside the mapping to count apart (a model file's
// mapping or copy), or nullptr.
ResidentMemory resident_memory(const void* in_region);
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
