// The pool's disk tier (PagePool with a spill directory): a page moved to
// disk and pinned again holds the same bytes; a corrupted page file is
// detected; an unusable or full directory is a clear KvSpillError; attention
// over a sequence larger than the budget equals attention without a budget
// bit for bit (dense, selecting, several threads), and the stats tell RAM
// from disk.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "common/fault_points.h"
#include "kv/kv_cache.h"
#include "kv/page_pool.h"
#include "kv_test_harness.h"
#include "test_util.h"

namespace tkv::test {
namespace {

namespace fs = std::filesystem;
using kv::KvConfig;
using kv::KvShape;
using kv::PagePins;
using kv::PagePool;

// A fresh directory for one test's page file.
std::string spill_dir(const std::string& name) {
  const std::string dir = temp_dir() + "/spill_" + name + "_" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = uint8_t(rng());
  return b;
}

// Allocates `n` movable pages of `bytes`, fills page i with random_bytes(bytes, i).
std::vector<uint8_t*> fill_pages(PagePool& pool, int n, size_t bytes) {
  std::vector<uint8_t*> pages;
  for (int i = 0; i < n; ++i) {
    uint8_t* p = pool.allocate(bytes, true);
    PagePins pin(pool, {p}, nullptr, true);
    const auto want = random_bytes(bytes, uint32_t(i));
    std::memcpy(p, want.data(), bytes);
    pages.push_back(p);
  }
  return pages;
}

constexpr size_t kPage = 6000;  // two OS pages of RAM each

TEST(SpillPoolTest, EvictedPageReadsBackByteIdentical) {
  const std::string dir = spill_dir("roundtrip");
  PagePool pool(4 * 8192, dir);
  const auto pages = fill_pages(pool, 12, kPage);
  kv::PoolStats st = pool.stats();
  EXPECT_LE(st.bytes_reserved, 4u * 8192);
  EXPECT_EQ(st.spilled_pages, 8);  // the 8 least recently used are on disk
  EXPECT_EQ(st.spilled_bytes, 8 * kPage);
  EXPECT_EQ(st.bytes_in_use, 12 * kPage);
  EXPECT_FALSE(pool.resident(pages[0]));
  EXPECT_TRUE(pool.resident(pages[11]));
  // Nothing is left in the directory: the page file has no name.
  EXPECT_TRUE(fs::is_empty(dir));
  // Every page, read back (evicting others), holds its bytes; twice, so that
  // pages that went to disk clean (not rewritten) read back too.
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < 12; ++i) {
      PagePins pin(pool, {pages[size_t(i)]});
      EXPECT_TRUE(pool.resident(pages[size_t(i)]));
      EXPECT_EQ(std::memcmp(pages[size_t(i)], random_bytes(kPage, uint32_t(i)).data(), kPage), 0)
          << "page " << i << " pass " << pass;
    }
  st = pool.stats();
  EXPECT_GT(st.spill_reads, 12);
  EXPECT_LT(st.spill_writes, st.spill_reads + 12);  // clean pages are not written again
  for (uint8_t* p : pages) pool.release(p, kPage);
  EXPECT_EQ(pool.stats().spilled_bytes, 0u);
  EXPECT_EQ(pool.stats().bytes_in_use, 0u);
}

TEST(SpillPoolTest, MoreThanTheBudgetAtOnceIsABudgetError) {
  PagePool pool(4 * 8192, spill_dir("pins"));
  const auto pages = fill_pages(pool, 6, kPage);
  // Six pages cannot be in RAM at once; the failed pin leaves nothing pinned.
  EXPECT_THROW(pool.pin(pages), kv::KvBudgetExceeded);
  {
    PagePins pin(pool, {pages[4], pages[5], pages[0], pages[1]});
    EXPECT_EQ(std::memcmp(pages[4], random_bytes(kPage, 4).data(), kPage), 0);
    EXPECT_EQ(std::memcmp(pages[0], random_bytes(kPage, 0).data(), kPage), 0);
  }
  // RAM held by what never moves (here one large allocation) is not made room in.
  uint8_t* fixed = pool.allocate(3 * 8192);
  EXPECT_THROW(pool.allocate(2 * 8192), kv::KvBudgetExceeded);
  EXPECT_THROW(pool.pin({pages[2], pages[3]}), kv::KvBudgetExceeded);
  pool.release(fixed, 3 * 8192);
  for (uint8_t* p : pages) pool.release(p, kPage);
}

// A step that needs room while another thread's step holds pins waits for
// them instead of failing.
TEST(SpillPoolTest, PinsOfAnotherThreadAreWaitedFor) {
  PagePool pool(4 * 8192, spill_dir("wait"));
  const auto pages = fill_pages(pool, 6, kPage);
  std::vector<uint8_t*> held(pages.begin(), pages.begin() + 4);
  pool.pin(held);
  std::thread other([&] {
    PagePins pin(pool, {pages[5]});  // all of RAM is pinned: waits
    EXPECT_EQ(std::memcmp(pages[5], random_bytes(kPage, 5).data(), kPage), 0);
  });
  pool.unpin(held);
  other.join();
  for (uint8_t* p : pages) pool.release(p, kPage);
}

TEST(SpillPoolTest, CorruptedSpilledPageIsDetected) {
  const std::string dir = spill_dir("corrupt");
  PagePool pool(2 * 8192, dir);
  const auto pages = fill_pages(pool, 4, kPage);
  ASSERT_FALSE(pool.resident(pages[0]));
  const int fd = page_file_fd(dir);
  ASSERT_GE(fd, 0) << "no page file open in " << dir;
  // pages[0] went to disk first: slot 0. Flip one byte of it.
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, 100), 1);
  b ^= 0x5a;
  ASSERT_EQ(::pwrite(fd, &b, 1, 100), 1);
  try {
    pool.pin({pages[0]});
    FAIL() << "expected KvSpillError";
  } catch (const kv::KvSpillError& e) {
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
  // Nothing stays pinned, the page stays on disk, the others are fine.
  EXPECT_FALSE(pool.resident(pages[0]));
  EXPECT_THROW(pool.pin({pages[0]}), kv::KvSpillError);
  {
    PagePins pin(pool, {pages[1]});
    EXPECT_EQ(std::memcmp(pages[1], random_bytes(kPage, 1).data(), kPage), 0);
  }
  for (uint8_t* p : pages) pool.release(p, kPage);
}

// Waits (polling; the read-ahead runs on the pool's own thread) until `page` is in RAM.
void wait_resident(const PagePool& pool, const uint8_t* page) {
  for (int i = 0; i < 20000 && !pool.resident(page); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(pool.resident(page)) << "the read-ahead did not read the page back";
}

TEST(SpillPoolTest, ReadAheadStaysWithinTheRamPinsLeave) {
  PagePool pool(4 * 8192, spill_dir("ahead"));
  const auto pages = fill_pages(pool, 12, kPage);  // 0..7 on disk, 8..11 in RAM
  {
    pool.read_ahead({pages[0], pages[1]});
    wait_resident(pool, pages[1]);
    wait_resident(pool, pages[0]);
    kv::PoolStats st = pool.stats();
    EXPECT_EQ(st.spill_reads_ahead, 2);
    EXPECT_EQ(st.spill_reads, 2);
    EXPECT_LE(st.bytes_reserved, 4u * 8192);
    PagePins first(pool, {pages[0], pages[1]});  // in RAM already: nothing read on demand
    st = pool.stats();
    EXPECT_EQ(st.read_ahead_hits, 2);
    EXPECT_EQ(st.spill_reads, 2);
    EXPECT_EQ(std::memcmp(pages[0], random_bytes(kPage, 0).data(), kPage), 0);
    EXPECT_EQ(std::memcmp(pages[1], random_bytes(kPage, 1).data(), kPage), 0);

    // Two pages are pinned: the read-ahead of six more takes the two pages of
    // RAM left (evicting 10 and 11) and stops there, never over the budget.
    pool.read_ahead({pages[2], pages[3], pages[4], pages[5], pages[6], pages[7]});
    wait_resident(pool, pages[3]);
    wait_resident(pool, pages[2]);
    EXPECT_FALSE(pool.resident(pages[10]));
    EXPECT_FALSE(pool.resident(pages[11]));
    {
      PagePins second(pool, {pages[2], pages[3]});
      st = pool.stats();
      EXPECT_EQ(st.spill_reads_ahead, 4);
      EXPECT_EQ(st.read_ahead_hits, 4);
      EXPECT_LE(st.bytes_reserved, 4u * 8192);
      EXPECT_FALSE(pool.resident(pages[4]));
      EXPECT_EQ(std::memcmp(pages[3], random_bytes(kPage, 3).data(), kPage), 0);
    }
    // A pin on demand may take the RAM of pages read ahead and not used yet.
    pool.read_ahead({pages[8], pages[9]});
    wait_resident(pool, pages[9]);
    wait_resident(pool, pages[8]);
    {
      PagePins demand(pool, {pages[4], pages[5]});
      EXPECT_EQ(std::memcmp(pages[5], random_bytes(kPage, 5).data(), kPage), 0);
      EXPECT_LE(pool.stats().bytes_reserved, 4u * 8192);
    }
    // Off, nothing is read ahead.
    pool.set_read_ahead(false);
    EXPECT_FALSE(pool.read_ahead_on());
    const int64_t before = pool.stats().spill_reads_ahead;
    pool.read_ahead({pages[6], pages[7]});
    PagePins last(pool, {pages[6], pages[7]});
    EXPECT_EQ(pool.stats().spill_reads_ahead, before);
    EXPECT_EQ(std::memcmp(pages[7], random_bytes(kPage, 7).data(), kPage), 0);
  }
  for (uint8_t* p : pages) pool.release(p, kPage);
}

TEST(SpillPoolTest, ReadAheadOfACorruptedPageLeavesTheErrorToThePin) {
  const std::string dir = spill_dir("ahead_corrupt");
  PagePool pool(2 * 8192, dir);
  const auto pages = fill_pages(pool, 4, kPage);
  const int fd = page_file_fd(dir);
  ASSERT_GE(fd, 0);
  uint8_t b = 0;  // pages[0] is in slot 0
  ASSERT_EQ(::pread(fd, &b, 1, 100), 1);
  b ^= 0x5a;
  ASSERT_EQ(::pwrite(fd, &b, 1, 100), 1);
  pool.read_ahead({pages[1], pages[0]});
  wait_resident(pool, pages[1]);
  // Whether the read-ahead got to pages[0] yet or not, the pin meets the mismatch.
  try {
    pool.pin({pages[0]});
    FAIL() << "expected KvSpillError";
  } catch (const kv::KvSpillError& e) {
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(pool.resident(pages[0]));
  {
    PagePins ok(pool, {pages[1]});
    EXPECT_EQ(std::memcmp(pages[1], random_bytes(kPage, 1).data(), kPage), 0);
  }
  for (uint8_t* p : pages) pool.release(p, kPage);
}

TEST(SpillPoolTest, UnusableDirectoryIsAClearError) {
  auto message = [](const std::string& dir) {
    try {
      PagePool pool(1 << 20, dir);
    } catch (const kv::KvSpillError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string missing = temp_dir() + "/no_such_spill_dir";
  EXPECT_NE(message(missing).find(missing), std::string::npos) << message(missing);
  const std::string file = spill_dir("file") + "/plain";
  std::ofstream(file) << "x";
  EXPECT_NE(message(file).find("not a directory"), std::string::npos) << message(file);
  // A read-only file system (procfs refuses new files, even to root).
  EXPECT_NE(message("/proc").find("cannot create the page file"), std::string::npos)
      << message("/proc");
  if (::geteuid() != 0) {  // permissions bind only those who are not root
    const std::string ro = spill_dir("readonly");
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_NE(message(ro).find("cannot create the page file"), std::string::npos) << message(ro);
    fs::permissions(ro, fs::perms::owner_all);
  }
  // A disk tier needs a budget (the RAM it bounds).
  EXPECT_THROW(PagePool(0, spill_dir("nobudget")), kv::KvSpillError);
}

// A file size limit makes the page file "full": writes past it fail (EFBIG)
// as they would with ENOSPC.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &old_);
    rlimit lim = old_;
    lim.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &lim);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

TEST(SpillPoolTest, FullDiskIsAClearErrorAndChangesNothing) {
  PagePool pool(2 * 8192, spill_dir("full"));
  std::vector<uint8_t*> pages;
  {
    FileSizeLimit limit(2 * kPage);  // room for two pages on "disk"
    pages = fill_pages(pool, 4, kPage);
    try {
      pool.allocate(kPage, true);
      FAIL() << "expected KvSpillError";
    } catch (const kv::KvSpillError& e) {
      EXPECT_NE(std::string(e.what()).find("cannot write a page"), std::string::npos) << e.what();
    }
    EXPECT_EQ(pool.stats().pages, 4);
  }
  // Every page still holds its bytes (the one that failed to move stayed in RAM).
  for (int i = 0; i < 4; ++i) {
    PagePins pin(pool, {pages[size_t(i)]});
    EXPECT_EQ(std::memcmp(pages[size_t(i)], random_bytes(kPage, uint32_t(i)).data(), kPage), 0);
  }
  for (uint8_t* p : pages) pool.release(p, kPage);
}

// Outputs of every layer for the whole sequence: a prefill in chunks, then
// single-token decode steps.
std::vector<float> run_sequence(kv::KvCache& cache, const RandomInputs& in, ThreadPool& pool,
                                int prefill, int decode, int chunk) {
  std::vector<float> outs;
  for (int done = 0; done < prefill; done += chunk)
    feed_chunk(cache, in, pool, done, std::min(chunk, prefill - done), &outs);
  for (int t = 0; t < decode; ++t) feed_chunk(cache, in, pool, prefill + t, 1, &outs);
  return outs;
}

struct SpillCase {
  const char* kv;
  int select;
  int threads;
};

class SpillAttentionTest : public ::testing::TestWithParam<SpillCase> {};

TEST_P(SpillAttentionTest, BudgetSmallerThanTheSequenceEqualsNoBudget) {
  const SpillCase p = GetParam();
  const KvShape shape{3, 4, 2, 64, 4096};
  const int prefill = 1500, decode = 40;
  RandomInputs in(shape, prefill + decode, 17);
  KvConfig config;
  ASSERT_TRUE(kv::parse_kv_shorthand(p.kv, config.k, config.v));
  config.select = p.select;
  config.select_dense_layers = 1;
  ThreadPool threads(p.threads);

  kv::KvCache plain(shape, config);
  const std::vector<float> want = run_sequence(plain, in, threads, prefill, decode, 256);
  const kv::KvStats full = plain.stats();

  // RAM for the sinks and rings and about a third of one layer's pages.
  config.budget_bytes = full.f16_bytes + full.page_bytes / 8;
  config.spill_dir = spill_dir(std::string("attn_") + p.kv + std::to_string(p.select));
  kv::KvCache spilled(shape, config);
  const std::vector<float> got = run_sequence(spilled, in, threads, prefill, decode, 256);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
      << "outputs differ with pages on disk";

  spilled.pool()->wait_read_ahead_idle();  // read-ahead of the last step may still run
  const kv::KvStats st = spilled.stats();
  EXPECT_EQ(st.page_bytes, full.page_bytes);
  EXPECT_GT(st.page_bytes_on_disk, full.page_bytes / 2);
  const kv::PoolStats ps = spilled.pool()->stats();
  EXPECT_LE(ps.bytes_reserved, config.budget_bytes);
  EXPECT_GT(ps.spill_reads, 0);
  EXPECT_EQ(ps.spilled_bytes, st.page_bytes_on_disk);
  EXPECT_TRUE(fs::is_empty(config.spill_dir));
  // The read-ahead read pages back before the pins that needed them, and
  // most of what it read was used.
  EXPECT_GT(ps.spill_reads_ahead, 0);
  EXPECT_GT(ps.read_ahead_hits, ps.spill_reads_ahead / 2);
  EXPECT_LE(ps.read_ahead_hits, ps.spill_reads_ahead);

  // Without read-ahead every page is read on demand, with the same outputs.
  config.read_ahead = false;
  kv::KvCache on_demand(shape, config);
  EXPECT_FALSE(on_demand.pool()->read_ahead_on());
  const std::vector<float> demand = run_sequence(on_demand, in, threads, prefill, decode, 256);
  ASSERT_EQ(demand.size(), want.size());
  EXPECT_EQ(std::memcmp(demand.data(), want.data(), demand.size() * sizeof(float)), 0)
      << "outputs differ without read-ahead";
  const kv::PoolStats pd = on_demand.pool()->stats();
  EXPECT_EQ(pd.spill_reads_ahead, 0);
  EXPECT_EQ(pd.read_ahead_hits, 0);
  EXPECT_GT(pd.spill_reads, 0);
  EXPECT_LE(pd.bytes_reserved, config.budget_bytes);
}

INSTANTIATE_TEST_SUITE_P(DenseAndSelecting, SpillAttentionTest,
                         ::testing::Values(SpillCase{"k4v2", 0, 1}, SpillCase{"k4v2", 0, 2},
                                           SpillCase{"k4v2", 256, 2}, SpillCase{"f16", 0, 2},
                                           SpillCase{"q8_0", 192, 1}),
                         [](const ::testing::TestParamInfo<SpillCase>& info) {
                           return std::string(info.param.kv) + "_sel" +
                                  std::to_string(info.param.select) + "_t" +
                                  std::to_string(info.param.threads);
                         });

// A load into a sequence whose pool has a disk tier either succeeds or
// leaves the sequence exactly as it was (same tokens, pages and outputs),
// wherever a page write or read back fails: every write and every read the
// load makes is failed in turn (common/fault_points.h: spill_*).
TEST(SpillCacheTest, LoadThatFailsPartWayLeavesTheSequenceAsItWas) {
  const KvShape shape{2, 4, 2, 64, 4096};
  KvConfig config;
  ASSERT_TRUE(kv::parse_kv_shorthand("k4v2", config.k, config.v));
  config.select = 256;  // summaries are rebuilt by the load too
  config.select_dense_layers = 1;
  ThreadPool threads(2);
  RandomInputs in(shape, 16, 3);  // decode tokens fed to compare sequences

  kv::KvCache saved(shape, config), twin(shape, config);
  saved.fill_synthetic(1500, 2, &threads);
  const std::string session = temp_dir() + "/spill_partial_load.session";
  saved.save(session, "fp");
  twin.fill_synthetic(600, 1, &threads);
  std::vector<float> twin_out, saved_out;
  feed_chunk(twin, in, threads, 0, 1, &twin_out);
  feed_chunk(saved, in, threads, 0, 1, &saved_out);

  // RAM for a fill chunk's pages (8 per layer at once) and a few more.
  config.budget_bytes = twin.stats().f16_bytes + 12 * 8192;
  config.spill_dir = spill_dir("partial_load");
  // The page moves the fill makes (the same every time), after which the faults count.
  kv::PoolStats filled;
  {
    kv::KvCache probe(shape, config);
    probe.fill_synthetic(600, 1, &threads);
    ASSERT_GT(probe.stats().page_bytes_on_disk, 0u);
    filled = probe.pool()->stats();
  }
  for (const bool writes : {true, false}) {
    const char* fault = writes ? "fault point: spill write" : "fault point: spill read";
    int failures = 0;
    for (int64_t n = 1;; ++n) {
      ASSERT_LT(n, 1000) << fault;
      FaultPoints faults;
      (writes ? faults.spill_write_fail_at : faults.spill_read_fail_at) =
          n + int64_t(writes ? filled.spill_writes : filled.spill_reads);
      set_fault_points(faults);
      kv::KvCache seq(shape, config);  // its page file reads the fault points
      set_fault_points({});
      seq.fill_synthetic(600, 1, &threads);
      const kv::KvStats before = seq.stats();
      std::vector<float> out;
      try {
        seq.load(session, "fp");
      } catch (const kv::KvSpillError& e) {
        ++failures;
        EXPECT_NE(std::string(e.what()).find(fault), std::string::npos) << e.what();
        const kv::KvStats after = seq.stats();
        EXPECT_EQ(after.n_tokens, 600) << fault << " " << n;
        EXPECT_EQ(after.pages_allocated, before.pages_allocated);
        EXPECT_EQ(after.summary_bytes, before.summary_bytes);
        EXPECT_EQ(seq.pool()->stats().bytes_in_use, after.persistent_bytes - after.summary_bytes);
        feed_chunk(seq, in, threads, 0, 1, &out);
        ASSERT_EQ(out, twin_out) << "the load failed at " << fault << " " << n
                                 << " and changed the sequence";
        continue;
      }
      // The fault is past the load's last page move (and still armed): the load is whole.
      EXPECT_EQ(seq.n_tokens(), 1500);
      break;
    }
    EXPECT_GT(failures, 0) << fault << ": the load moved no page";
  }
  kv::KvCache seq(shape, config);
  seq.fill_synthetic(600, 1, &threads);
  seq.load(session, "fp");
  std::vector<float> out;
  feed_chunk(seq, in, threads, 0, 1, &out);
  EXPECT_EQ(out, saved_out);
  std::remove(session.c_str());
}

TEST(SpillCacheTest, SaveLoadForkAndTruncateWithPagesOnDisk) {
  const KvShape shape{2, 4, 2, 64, 4096};
  RandomInputs in(shape, 1400, 23);
  KvConfig config;
  ASSERT_TRUE(kv::parse_kv_shorthand("k4v2", config.k, config.v));
  ThreadPool threads(2);
  kv::KvCache plain(shape, config);
  run_sequence(plain, in, threads, 1000, 0, 256);
  config.budget_bytes = plain.stats().f16_bytes * 2 + plain.stats().page_bytes / 6;
  config.spill_dir = spill_dir("persist");
  kv::KvCache spilled(shape, config);
  run_sequence(spilled, in, threads, 1000, 0, 256);
  ASSERT_GT(spilled.stats().page_bytes_on_disk, 0u);

  // Sessions saved with and without pages on disk (their bytes differ only
  // in never-written slots) load, into pools with and without a disk tier,
  // to sequences that go on alike.
  const std::string a = temp_dir() + "/spill_plain.session", b = temp_dir() + "/spill_disk.session";
  plain.save(a, "fp");
  spilled.save(b, "fp");
  KvConfig plain_config = config;
  plain_config.budget_bytes = 0;
  plain_config.spill_dir.clear();
  {
    kv::KvCache ref(shape, plain_config), from_disk(shape, plain_config), into_disk(shape, config);
    ref.load(a, "fp");
    from_disk.load(b, "fp");
    into_disk.load(a, "fp");
    ASSERT_GT(into_disk.stats().page_bytes_on_disk, 0u);
    std::vector<float> want, got1, got2;
    feed_chunk(ref, in, threads, 1200, 64, &want);
    feed_chunk(from_disk, in, threads, 1200, 64, &got1);
    feed_chunk(into_disk, in, threads, 1200, 64, &got2);
    EXPECT_EQ(got1, want);
    EXPECT_EQ(got2, want);
  }

  // A fork (pages shared, copied on write), truncated, goes on as the plain sequence.
  auto fork = spilled.fork();
  fork->truncate(900);
  plain.truncate(900);
  std::vector<float> want, got;
  feed_chunk(plain, in, threads, 1000, 100, &want);
  feed_chunk(*fork, in, threads, 1000, 100, &got);
  EXPECT_EQ(got, want);
  fs::remove(a);
  fs::remove(b);
}

bool on_tmpfs(const std::string& dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && long(fs.f_type) == 0x01021994;
}

TEST(SpillPoolTest, TmpfsDirectoryWarnsOnce) {
  if (!on_tmpfs("/dev/shm")) GTEST_SKIP() << "/dev/shm is not tmpfs here";
  const std::string dir = "/dev/shm/turbokv_spill_" + std::to_string(::getpid());
  fs::create_directories(dir);
  ::testing::internal::CaptureStderr();
  { PagePool a(1 << 20, dir), b(1 << 20, dir); }
  const std::string err = ::testing::internal::GetCapturedStderr();
  fs::remove_all(dir);
  size_t count = 0;
  for (size_t at = err.find("tmpfs"); at != std::string::npos; at = err.find("tmpfs", at + 1))
    ++count;
  // Once per process: an earlier test with a tmpfs temp dir may have had it.
  EXPECT_EQ(count, on_tmpfs(temp_dir()) ? count : 1u) << err;
  EXPECT_LE(count, 1u) << err;
}

// Sequences on several threads, sharing pages (forks) in one pool with a
// disk tier, each go on as they do alone without a budget.
TEST(SpillCacheTest, ForksOnThreadsShareASpillingPool) {
  const KvShape shape{2, 4, 2, 64, 4096};
  const int prompt = 700, turn = 300, n_forks = 3;
  RandomInputs in(shape, prompt + n_forks * turn, 31);
  KvConfig config;
  ASSERT_TRUE(kv::parse_kv_shorthand("k4v2", config.k, config.v));
  ThreadPool one(1);
  auto continue_forks = [&](kv::KvCache& base, bool on_threads) {
    std::vector<std::unique_ptr<kv::KvCache>> forks;
    for (int f = 0; f < n_forks; ++f) forks.push_back(base.fork());
    std::vector<std::vector<float>> outs(n_forks);
    auto go = [&](int f) {
      ThreadPool mine(1);
      for (int t = 0; t < turn; t += 50)
        feed_chunk(*forks[size_t(f)], in, mine, prompt + f * turn + t, 50, &outs[size_t(f)]);
    };
    if (on_threads) {
      std::vector<std::thread> workers;
      for (int f = 0; f < n_forks; ++f) workers.emplace_back(go, f);
      for (auto& w : workers) w.join();
    } else {
      for (int f = 0; f < n_forks; ++f) go(f);
    }
    return outs;
  };
  kv::KvCache plain(shape, config);
  run_sequence(plain, in, one, prompt, 0, 256);
  const auto want = continue_forks(plain, false);

  const kv::KvStats st = plain.stats();
  auto pool = std::make_shared<PagePool>(4 * st.f16_bytes + st.page_bytes / 2, spill_dir("forks"));
  kv::KvCache base(shape, config, pool);
  run_sequence(base, in, one, prompt, 0, 256);
  const auto got = continue_forks(base, true);
  for (int f = 0; f < n_forks; ++f) EXPECT_EQ(got[size_t(f)], want[size_t(f)]) << "fork " << f;
  EXPECT_GT(pool->stats().spill_reads, 0);
}

}  // namespace
}  // namespace tkv::test
