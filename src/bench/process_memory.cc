#include "bench/process_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include "common/sys_info.h"

namespace tkv::bench {

MemorySnapshot memory_snapshot(const void* model_bytes) {
  MemorySnapshot s;
  s.peak_rss = peak_rss_bytes();
  s.rss = current_rss_bytes();
  const int64_t resident = model_bytes ? resident_bytes_of_mapping(model_bytes) : -1;
  s.model_resident = resident > 0 ? uint64_t(resident) : 0;
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
