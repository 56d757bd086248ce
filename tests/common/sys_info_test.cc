// src/common/sys_info: the peak-RSS figures and their portable fallback.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "common/sys_info.h"

namespace tkv {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

// Allocates `bytes` and writes one byte per page so that every page becomes
// resident; returns the block (freeing it is the caller's business).
std::unique_ptr<uint8_t[]> touch_memory(uint64_t bytes) {
  std::unique_ptr<uint8_t[]> block(new uint8_t[bytes]);
  volatile uint8_t* p = block.get();
  for (uint64_t i = 0; i < bytes; i += 4096) p[i] = uint8_t(i >> 12);
  return block;
}

TEST(SysInfoTest, RusagePeakIsPlausibleAndGrowsAfterTouchingMemory) {
  const uint64_t before = rusage_peak_rss_bytes();
  // A process running gtest holds at least a few hundred KiB, and no test
  // process here holds a TiB: this catches a kilobytes/bytes mix-up.
  EXPECT_GT(before, 256u * 1024);
  EXPECT_LT(before, uint64_t(1) << 40);
  // Raise the resident set 64 MiB above the old peak (it may lie above the
  // current RSS: earlier tests can have freed memory).
  const uint64_t rss = current_rss_bytes();
  const uint64_t headroom = before > rss ? before - rss : 0;
  const auto block = touch_memory(headroom + 64 * kMiB);
  const uint64_t after = rusage_peak_rss_bytes();
  EXPECT_GE(after, before + 48 * kMiB) << "before " << before << " after " << after;
  EXPECT_GE(current_rss_bytes(), rss + 48 * kMiB);
  EXPECT_GE(peak_rss_bytes(), after - 4 * kMiB);
}

#if defined(__linux__)
TEST(SysInfoTest, RusagePeakAgreesWithVmHWM) {
  // Both are the kernel's high-water mark of this process's RSS (VmHWM in
  // /proc/self/status, ru_maxrss in kilobytes), as long as nothing reset
  // VmHWM: peak_rss_bytes() reads VmHWM on Linux.
  const auto block = touch_memory(32 * kMiB);
  const uint64_t vm_hwm = peak_rss_bytes();
  const uint64_t maxrss = rusage_peak_rss_bytes();
  const uint64_t diff = vm_hwm > maxrss ? vm_hwm - maxrss : maxrss - vm_hwm;
  EXPECT_LE(diff, std::max<uint64_t>(2 * kMiB, vm_hwm / 50))
      << "VmHWM " << vm_hwm << " ru_maxrss " << maxrss;
}
#endif

}  // namespace
}  // namespace tkv
