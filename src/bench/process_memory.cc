#include "bench/process_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "common/sys_info.h"

namespace tkv::bench {

uint64_t mapped_file_resident_bytes(const std::string& path) {
  std::error_code ec;
  const std::string real = std::filesystem::weakly_canonical(path, ec).string();
  if (ec) return 0;
  std::ifstream in("/proc/self/smaps");
  if (!in) return 0;
  // Header lines: "addr-addr perms offset dev inode   pathname"; the fields
  // that follow a header ("Rss:   1234 kB") belong to that mapping.
  uint64_t total = 0;
  bool in_model = false;
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    const bool is_field =
        colon != std::string::npos && colon < line.find(' ') && line.find('-') > colon;
    if (!is_field) {
      const size_t slash = line.find('/');
      in_model = slash != std::string::npos && std::string_view(line).substr(slash) == real;
      continue;
    }
    if (in_model && line.compare(0, 4, "Rss:") == 0)
      total += std::strtoull(line.c_str() + 4, nullptr, 10) * 1024;
  }
  return total;
}

MemorySnapshot memory_snapshot(const std::string& model_path) {
  MemorySnapshot s;
  s.peak_rss = peak_rss_bytes();
  s.rss = current_rss_bytes();
  s.model_resident = model_path.empty() ? 0 : mapped_file_resident_bytes(model_path);
  return s;
}

bool reset_peak_rss() {
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return ok;
}

Json to_json(const MemorySnapshot& s) {
  return {{"peak_rss_bytes", s.peak_rss},
          {"rss_bytes", s.rss},
          {"model_resident_bytes", s.model_resident}};
}

}  // namespace tkv::bench
