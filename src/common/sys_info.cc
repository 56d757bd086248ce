#include "common/sys_info.h"

#include <sys/resource.h>
#include <unistd.h>

#ifdef __APPLE__
#include <mach/mach.h>
#include <sys/sysctl.h>
#endif

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"

namespace tkv {

namespace {

#if defined(__linux__)
// Reads "<key>:   1234 kB" from a /proc file (/proc/self/status,
// /proc/meminfo); 0 if absent.
uint64_t proc_kb(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) == 0 && line.size() > key.size() &&
        line[key.size()] == ':') {
      std::istringstream ss(line.substr(key.size() + 1));
      uint64_t kb = 0;
      ss >> kb;
      return kb;
    }
  }
  return 0;
}
#endif

#ifdef __APPLE__
// A numeric sysctl (hw.memsize, hw.physicalcpu, hw.optional.*); 0 if absent.
uint64_t sysctl_u64(const char* name) {
  uint64_t v64 = 0;
  size_t size = sizeof v64;
  if (sysctlbyname(name, &v64, &size, nullptr, 0) != 0) return 0;
  if (size == sizeof(uint32_t)) {  // int-valued sysctls fill the low 4 bytes
    uint32_t v32;
    std::memcpy(&v32, &v64, sizeof v32);
    return v32;
  }
  return v64;
}
#endif

}  // namespace

uint64_t rusage_peak_rss_bytes() {
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) != 0 || ru.ru_maxrss < 0) return 0;
#ifdef __APPLE__
  return uint64_t(ru.ru_maxrss);  // macOS reports bytes
#else
  return uint64_t(ru.ru_maxrss) * 1024;  // Linux and the BSDs report kilobytes
#endif
}

uint64_t peak_rss_bytes() {
#if defined(__linux__)
  if (const uint64_t kb = proc_kb("/proc/self/status", "VmHWM")) return kb * 1024;
#endif
  return rusage_peak_rss_bytes();
}

uint64_t current_rss_bytes() {
#if defined(__linux__)
  return proc_kb("/proc/self/status", "VmRSS") * 1024;
#elif defined(__APPLE__)
  mach_task_basic_info_data_t info{};
  mach_msg_type_number_t count = MACH_TASK_BASIC_INFO_COUNT;
  if (task_info(mach_task_self(), MACH_TASK_BASIC_INFO, reinterpret_cast<task_info_t>(&info),
                &count) != KERN_SUCCESS)
    return 0;
  return uint64_t(info.resident_size);
#else
  return 0;
#endif
}

uint64_t total_memory_bytes() {
#ifdef __APPLE__
  return sysctl_u64("hw.memsize");
#else
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
#endif
}

int64_t resident_bytes_of_mapping(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return -1;
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  std::string line;
  // A mapping's header line ("lo-hi perms offset dev inode path") is
  // followed by its fields ("Rss:   1234 kB").
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2 && line.find('-') < 17) {
      inside = at >= lo && at < hi;
      continue;
    }
    long long kb = 0;
    if (inside && std::sscanf(line.c_str(), "Rss: %lld kB", &kb) == 1) return kb * 1024;
  }
  return -1;
}

ResidentMemory resident_memory(const void* in_region) {
  ResidentMemory m;
#if defined(__linux__)
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return m;
  const uintptr_t at = reinterpret_cast<uintptr_t>(in_region);
  uint64_t* bucket = nullptr;
  unsigned long long prev_hi = 0;
  bool prev_guard = false;
  std::string line;
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;
    char perms[8] = {};
    unsigned long long offset = 0, inode = 0;
    char dev[16] = {};
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %15s %llu %n", &lo, &hi, perms, &offset, dev,
                    &inode, &path_at) >= 6 &&
        line.find('-') < 17) {
      const std::string path = path_at > 0 ? line.substr(size_t(path_at)) : std::string();
      const bool anonymous = path.empty();
      if (in_region && at >= lo && at < hi)
        bucket = &m.region;
      else if (path == "[stack]" ||
               (anonymous && perms[0] == 'r' && perms[1] == 'w' && prev_guard && prev_hi == lo))
        bucket = &m.stacks;  // a thread's stack sits right above its PROT_NONE guard
      else if (!path.empty() && path[0] == '/')
        bucket = &m.files;
      else
        bucket = &m.anonymous;
      prev_guard = anonymous && std::strncmp(perms, "---", 3) == 0;
      prev_hi = hi;
      continue;
    }
    long long kb = 0;
    if (bucket && std::sscanf(line.c_str(), "Rss: %lld kB", &kb) == 1) {
      *bucket += uint64_t(kb) * 1024;
      m.total += uint64_t(kb) * 1024;
    }
  }
#else
  (void)in_region;
#endif
  return m;
}

uint64_t available_memory_bytes() {
#if defined(__linux__)
  return proc_kb("/proc/meminfo", "MemAvailable") * 1024;
#else
  return 0;
#endif
}

CpuInfo cpu_info() {
  CpuInfo info;
  info.logical_cpus = int(std::thread::hardware_concurrency());
  if (info.logical_cpus < 1) info.logical_cpus = 1;
  info.physical_cores = physical_core_count();
  std::string line, flags_line;
#ifdef __APPLE__
  // No /proc: the brand string and the hw.optional feature sysctls, named as
  // Linux's /proc/cpuinfo names them so reports read the same.
  char brand[256] = {};
  size_t brand_size = sizeof brand - 1;
  if (sysctlbyname("machdep.cpu.brand_string", brand, &brand_size, nullptr, 0) == 0)
    info.model = brand;
  static const std::pair<const char*, const char*> kAppleFeatures[] = {
      {"hw.optional.neon", "asimd"},         {"hw.optional.arm.FEAT_DotProd", "asimddp"},
      {"hw.optional.arm.FEAT_FP16", "fphp"}, {"hw.optional.arm.FEAT_I8MM", "i8mm"},
      {"hw.optional.avx2_0", "avx2"},        {"hw.optional.fma", "fma"},
      {"hw.optional.avx512f", "avx512f"}};
  for (const auto& [sysctl_name, flag] : kAppleFeatures) {
    if (sysctl_u64(sysctl_name) == 0) continue;
    if (!flags_line.empty()) flags_line += ' ';
    flags_line += flag;
  }
#endif
  std::ifstream in("/proc/cpuinfo");
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (info.model.empty() && (key == "model name" || key == "Model")) info.model = value;
    if (flags_line.empty() && (key == "flags" || key == "Features")) flags_line = value;
  }
  static const char* kInteresting[] = {
      "sse4_2",   "avx",         "avx2",       "fma",         "f16c",        "avx512f",  "avx512bw",
      "avx512vl", "avx512_vnni", "avx512vbmi", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile",
      "asimd",    "asimddp",     "fphp",       "sve",         "sve2",        "i8mm"};
  std::istringstream ss(" " + flags_line + " ");
  std::vector<std::string> have;
  std::string f;
  while (ss >> f) have.push_back(f);
  for (const char* want : kInteresting) {
    for (const auto& h : have) {
      if (h == want) {
        if (!info.flags.empty()) info.flags += ' ';
        info.flags += want;
        break;
      }
    }
  }
  if (info.model.empty()) info.model = "unknown CPU";
  return info;
}

std::string format_bytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
  return buf;
}

uint64_t parse_bytes(const std::string& text) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    fail("invalid size '", text, "' (expected e.g. 512M, 16G, 4096)");
  }
  if (!(v >= 0) || !std::isfinite(v)) fail("invalid size '", text, "'");
  std::string suffix = text.substr(pos);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (suffix.size() == 2 && (suffix[1] == 'i' || suffix[1] == 'I')) suffix.pop_back();
  double mul = 1;
  if (suffix.empty()) {
  } else if (suffix == "k" || suffix == "K") {
    mul = 1024.0;
  } else if (suffix == "m" || suffix == "M") {
    mul = 1024.0 * 1024;
  } else if (suffix == "g" || suffix == "G") {
    mul = 1024.0 * 1024 * 1024;
  } else if (suffix == "t" || suffix == "T") {
    mul = 1024.0 * 1024 * 1024 * 1024;
  } else {
    fail("invalid size '", text, "': unknown suffix '", suffix, "' (use K, M, G or T)");
  }
  return uint64_t(v * mul);
}

}  // namespace tkv
