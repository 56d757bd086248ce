// The reader never sizes an allocation from a claimed count: parsing hostile
// headers allocates a small multiple of the input's size, however large the
// counts in it. This binary replaces the global operator new to measure that,
// so it is its own executable.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "common/error.h"
#include "gguf/gguf.h"
#include "raw_gguf.h"

namespace {
std::atomic<bool> g_tracking{false};
std::atomic<size_t> g_total{0};
std::atomic<size_t> g_largest{0};
}  // namespace

void* operator new(size_t n) {
  if (g_tracking.load(std::memory_order_relaxed)) {
    g_total += n;
    size_t prev = g_largest.load();
    while (n > prev && !g_largest.compare_exchange_weak(prev, n)) {
    }
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}

namespace tkv::gguf {
namespace {

using test::RawGguf;

struct Usage {
  size_t total, largest;
  bool threw;
};

Usage measure(const RawGguf& raw) {
  g_total = 0;
  g_largest = 0;
  bool threw = false;
  g_tracking = true;
  try {
    GgufFile::parse(raw.data().data(), raw.size(), "hostile.gguf");
  } catch (const Error&) {
    threw = true;
  }
  g_tracking = false;
  return {g_total.load(), g_largest.load(), threw};
}

TEST(GgufAllocation, HugeClaimedCountsAllocateAlmostNothing) {
  const RawGguf cases[] = {
      RawGguf().header(1ull << 60, 0),
      RawGguf().header(0, 1ull << 60),
      RawGguf().header(1ull << 40, 1ull << 40).zeros(64),
      RawGguf().header(0, 1).str("k").u32(9).u32(10).u64(1ull << 61),
      RawGguf().header(0, 1).str("k").u32(9).u32(8).u64(1ull << 59).zeros(64),
      RawGguf().header(0, 1).str("k").u32(9).u32(9).u64(1ull << 59).zeros(64),
      RawGguf().header(0, 1).str("k").u32(8).u64(1ull << 62),
      RawGguf().header(1, 0).str("t").u32(4).u64(1ull << 40).u64(1ull << 40).u64(1).u64(1),
  };
  for (const RawGguf& raw : cases) {
    const Usage u = measure(raw);
    EXPECT_TRUE(u.threw);
    // Error messages and bookkeeping only.
    EXPECT_LT(u.total, 4096u) << "input of " << raw.size() << " bytes";
  }
}

TEST(GgufAllocation, AllocationIsBoundedByTheInputSize) {
  // Counts that are as large as the remaining bytes allow, and real.
  const size_t n = 1 << 16;
  RawGguf bytes_array;
  bytes_array.header(0, 1).str("k").u32(9).u32(0).u64(n).zeros(n);
  RawGguf empty_strings;
  empty_strings.header(0, 1).str("k").u32(9).u32(8).u64(n);
  for (size_t k = 0; k < n; ++k) empty_strings.u64(0);
  RawGguf empty_arrays;
  empty_arrays.header(0, 1).str("k").u32(9).u32(9).u64(n);
  for (size_t k = 0; k < n; ++k) empty_arrays.u32(0).u64(0);
  for (const RawGguf* raw : {&bytes_array, &empty_strings, &empty_arrays}) {
    const Usage u = measure(*raw);
    EXPECT_FALSE(u.threw);
    EXPECT_LT(u.total, 40 * raw->size()) << "input of " << raw->size() << " bytes";
  }
}

}  // namespace
}  // namespace tkv::gguf
