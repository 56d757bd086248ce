// src/common: thread pool, f16 conversion, atomic files, size parsing.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/f16.h"
#include "common/sys_info.h"
#include "common/thread_pool.h"
#include "test_util.h"

namespace tkv {
namespace {

TEST(ThreadPoolTest, RunsEveryTaskExactlyOnce) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(size_t(n > 0 ? n : 1));
      std::atomic<int> bad_thread{0};
      pool.run(n, [&](int64_t task, int thread) {
        hits[size_t(task)].fetch_add(1);
        if (thread < 0 || thread >= threads) bad_thread.fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[size_t(i)].load(), 1) << n << " " << i;
      EXPECT_EQ(bad_thread.load(), 0);
    }
  }
}

TEST(ThreadPoolTest, ParallelForCoversRangeInGrains) {
  ThreadPool pool(3);
  for (int64_t n : {1, 5, 64, 1001}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, 16, [&](int64_t b, int64_t e, int) {
      EXPECT_TRUE(b % 16 == 0);
      for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[size_t(i)].load(), 1);
  }
}

TEST(ThreadPoolTest, ManySmallRegionsInARow) {
  // Decode issues hundreds of regions per token: they must not lose work.
  ThreadPool pool(4);
  std::atomic<int64_t> sum{0};
  for (int r = 0; r < 5000; ++r) pool.run(3, [&](int64_t t, int) { sum.fetch_add(t + 1); });
  EXPECT_EQ(sum.load(), 5000 * 6);
  EXPECT_GE(physical_core_count(), 1);
}

TEST(F16Test, ExactRoundTripOfEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    EXPECT_EQ(f32_to_f16(f), uint16_t(h)) << h;
  }
}

TEST(F16Test, RoundsToNearestEven) {
  // Near 1 the f16 spacing is 2^-10: halfway cases go to the even mantissa.
  EXPECT_EQ(f16_to_f32(f32_to_f16(1.0f + 1.0f / 2048)), 1.0f);
  EXPECT_EQ(f16_to_f32(f32_to_f16(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);
  EXPECT_EQ(f16_to_f32(f32_to_f16(1.0f + 1.1f / 2048)), 1.0f + 1.0f / 1024);
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);                   // overflow -> inf
  EXPECT_EQ(f32_to_f16(-1e-10f), 0x8000);                // underflow -> -0
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(3.140625f)), 3.140625f);
}

TEST(AtomicFileTest, CommitReplacesAndAbandonLeavesNoTrace) {
  const std::string dir = test::temp_dir();
  const std::string path = dir + "/out.txt";
  write_file_atomic(path, "first");
  EXPECT_EQ(read_file(path), "first");
  {
    AtomicFileWriter w(path);
    w.write("second, never committed");
  }  // destroyed without commit()
  EXPECT_EQ(read_file(path), "first");
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);  // no temporary left behind
  write_file_atomic(path, "third");
  EXPECT_EQ(read_file(path), "third");
  EXPECT_THROW(read_file(dir + "/missing"), Error);
  EXPECT_THROW(write_file_atomic(dir + "/no/such/dir/x", "y"), Error);
}

TEST(SysInfoTest, ParsesSizesAndReadsMemory) {
  EXPECT_EQ(parse_bytes("4096"), 4096u);
  EXPECT_EQ(parse_bytes("16G"), 16ull << 30);
  EXPECT_EQ(parse_bytes("512M"), 512ull << 20);
  EXPECT_EQ(parse_bytes("1.5k"), 1536u);
  EXPECT_EQ(parse_bytes("2GiB"), 2ull << 30);
  EXPECT_THROW(parse_bytes("lots"), Error);
  EXPECT_THROW(parse_bytes("5X"), Error);
  EXPECT_THROW(parse_bytes("-1G"), Error);
  EXPECT_GT(peak_rss_bytes(), 0u);
  EXPECT_GE(peak_rss_bytes(), current_rss_bytes());
  EXPECT_GT(total_memory_bytes(), 0u);
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_FALSE(cpu_info().model.empty());
}

}  // namespace
}  // namespace tkv
