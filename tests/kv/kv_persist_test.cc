// Saving and restoring a sequence: the restored cache continues exactly
// where the original would have; damaged or mismatched files are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "kv/kv_cache.h"
#include "kv_test_harness.h"
#include "test_util.h"

namespace tkv::test {
namespace {

struct Fixture {
  kv::KvShape shape{2, 4, 2, 64, 1024};
  kv::KvConfig config;
  RandomInputs in{shape, 240, 21};
  ThreadPool pool{2};

  void feed(kv::KvCache& cache, int64_t from, int n, std::vector<float>* outs) {
    feed_chunk(cache, in, pool, from, n, outs);
  }
};

TEST(KvPersistTest, RoundTripContinuesIdentically) {
  for (const char* kv : {"f16", "k4v2"}) {
    Fixture f;
    ASSERT_TRUE(kv::parse_kv_shorthand(kv, f.config.k, f.config.v));
    const std::string path = temp_dir() + "/session.tkvs";
    kv::KvCache a(f.shape, f.config);
    f.feed(a, 0, 200, nullptr);
    a.save(path, "model-A");
    std::vector<float> expect, got;
    for (int t = 200; t < 220; ++t) f.feed(a, t, 1, &expect);

    kv::KvCache b(f.shape, f.config);
    b.load(path, "model-A");
    EXPECT_EQ(b.n_tokens(), 200);
    EXPECT_EQ(b.stats().persistent_bytes,
              kv::KvCache(f.shape, f.config).stats().persistent_bytes + b.stats().page_bytes);
    for (int t = 200; t < 220; ++t) f.feed(b, t, 1, &got);
    ASSERT_EQ(expect.size(), got.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(expect[i], got[i]) << kv << " at " << i;
  }
}

TEST(KvPersistTest, MismatchedOrDamagedFilesAreRefused) {
  Fixture f;
  ASSERT_TRUE(kv::parse_kv_shorthand("k4v2", f.config.k, f.config.v));
  const std::string dir = temp_dir();
  const std::string path = dir + "/s.tkvs";
  kv::KvCache a(f.shape, f.config);
  f.feed(a, 0, 150, nullptr);
  a.save(path, "model-A");

  auto expect_error = [&](kv::KvCache& c, const std::string& p, const std::string& fp,
                          const char* needle) {
    try {
      c.load(p, fp);
      ADD_FAILURE() << "expected an error containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  kv::KvCache b(f.shape, f.config);
  expect_error(b, path, "model-B", "different model");
  kv::KvConfig other = f.config;
  other.residual = 32;
  kv::KvCache c(f.shape, other);
  expect_error(c, path, "model-A", "KV settings");

  // Flip a byte in the last page: the checksum catches it.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string damaged = bytes;
  damaged[damaged.size() - 10] ^= 0x5a;
  const std::string dpath = dir + "/damaged.tkvs";
  std::ofstream(dpath, std::ios::binary) << damaged;
  expect_error(b, dpath, "model-A", "checksum");
  // Truncated: the GGUF reader refuses it.
  const std::string tpath = dir + "/truncated.tkvs";
  std::ofstream(tpath, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_THROW(b.load(tpath, "model-A"), Error);
  EXPECT_EQ(b.n_tokens(), 0);  // a failed load leaves the cache as it was
}

}  // namespace
}  // namespace tkv::test
