// Session files, version 2: caller metadata (token ids, byte strings) round
// trips, every flipped byte is caught and leaves the sequence as it was, a
// pool without room leaves it as it was, a truncated sequence saves what it
// holds, version 1 files still load and other versions are refused by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "gguf/gguf.h"
#include "kv/kv_cache.h"
#include "kv/page_pool.h"
#include "kv_test_harness.h"
#include "test_util.h"

namespace tkv::test {
namespace {

const kv::KvShape kShape{2, 4, 2, 64, 1024};

kv::KvConfig k4v2() {
  kv::KvConfig c;
  EXPECT_TRUE(kv::parse_kv_shorthand("k4v2", c.k, c.v));
  c.sinks = 4;
  c.residual = 16;
  c.page_tokens = 32;
  return c;
}

struct Fixture {
  RandomInputs in{kShape, 400, 23};
  ThreadPool pool{2};

  void feed(kv::KvCache& cache, int64_t from, int n, std::vector<float>* outs = nullptr) {
    feed_chunk(cache, in, pool, from, n, outs);
  }
  // Outputs of tokens [from, from + n), one at a time.
  std::vector<float> decode(kv::KvCache& cache, int64_t from, int n) {
    std::vector<float> outs;
    for (int t = 0; t < n; ++t) feed(cache, from + t, 1, &outs);
    return outs;
  }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

kv::SessionMeta sample_meta() {
  kv::SessionMeta m;
  m.tokens = {1, 15043, 0, -1, 2147483647, 32000};
  m.strings["transcript"] = std::string("user: h\xc3\xa9llo\n\0\xff\xfe raw", 20);
  m.strings["empty"] = "";
  m.strings["sampler"] = "temp=0.7 seed=42";
  return m;
}

TEST(SessionV2Test, MetadataRoundTripsAndTheSequenceContinuesIdentically) {
  Fixture f;
  const std::string path = temp_dir() + "/s.tkvs";
  kv::KvCache a(kShape, k4v2());
  f.feed(a, 0, 150);
  a.save(path, "model-A", sample_meta());
  EXPECT_FALSE(std::filesystem::exists(path + ".staging." + std::to_string(::getpid())));
  const std::vector<float> expect = f.decode(a, 150, 10);

  kv::KvCache b(kShape, k4v2());
  const kv::SessionMeta got = b.load(path, "model-A");
  EXPECT_EQ(got, sample_meta());
  EXPECT_EQ(got.strings.at("transcript").size(), 20u);
  EXPECT_EQ(b.n_tokens(), 150);
  EXPECT_EQ(f.decode(b, 150, 10), expect);
  // The old signatures: no metadata.
  a.save(path, "model-A");
  EXPECT_EQ(b.load(path, "model-A"), kv::SessionMeta{});
}

TEST(SessionV2Test, TruncatedSequenceSavesWhatItHolds) {
  Fixture f;
  const std::string path = temp_dir() + "/t.tkvs";
  kv::KvCache a(kShape, k4v2());
  f.feed(a, 0, 200);
  a.truncate(190);  // the ring now holds fewer than R tokens
  a.save(path, "model-A");
  kv::KvCache b(kShape, k4v2());
  b.load(path, "model-A");
  EXPECT_EQ(b.stats().page_bytes, a.stats().page_bytes);
  EXPECT_EQ(f.decode(b, 190, 8), f.decode(a, 190, 8));
}

TEST(SessionV2Test, EveryFlippedByteIsCaughtAndChangesNothing) {
  Fixture f;
  const std::string dir = temp_dir();
  kv::KvCache a(kShape, k4v2());
  f.feed(a, 0, 120);
  a.save(dir + "/good.tkvs", "model-A", sample_meta());
  const std::string good = read_bytes(dir + "/good.tkvs");
  ASSERT_GT(good.size(), 4096u);

  kv::KvCache b(kShape, k4v2()), twin(kShape, k4v2());
  f.feed(b, 0, 40);
  f.feed(twin, 0, 40);
  const kv::KvStats before = b.stats();
  // Every byte of the header region, then a stride through the data, and
  // the end of the file (the checksum itself).
  std::vector<size_t> offsets;
  for (size_t i = 0; i < 1536; ++i) offsets.push_back(i);
  for (size_t i = 1536; i < good.size(); i += 61) offsets.push_back(i);
  for (size_t i = good.size() - 40; i < good.size(); ++i) offsets.push_back(i);
  const std::string bad = dir + "/bad.tkvs";
  int caught = 0;
  for (size_t at : offsets) {
    std::string damaged = good;
    damaged[at] = char(damaged[at] ^ (1 << (at % 8)));
    write_bytes(bad, damaged);
    try {
      b.load(bad, "model-A");
      ADD_FAILURE() << "a flipped byte at " << at << " of " << good.size() << " was not caught";
    } catch (const Error&) {
      ++caught;
    }
    ASSERT_EQ(b.n_tokens(), 40) << at;
    ASSERT_EQ(b.stats().persistent_bytes, before.persistent_bytes) << at;
  }
  EXPECT_EQ(caught, int(offsets.size()));
  // b was not touched: it goes on exactly like its twin.
  EXPECT_EQ(f.decode(b, 40, 5), f.decode(twin, 40, 5));
}

TEST(SessionV2Test, PoolWithoutRoomLeavesTheSequenceAsItWas) {
  Fixture f;
  const std::string path = temp_dir() + "/big.tkvs";
  kv::KvCache big(kShape, k4v2());
  f.feed(big, 0, 300);
  big.save(path, "model-A");

  kv::KvCache probe(kShape, k4v2());
  auto pool = std::make_shared<kv::PagePool>(probe.stats().f16_bytes + big.stats().page_bytes / 2);
  kv::KvCache b(kShape, k4v2(), pool), twin(kShape, k4v2());
  f.feed(b, 0, 60);
  f.feed(twin, 0, 60);
  const uint64_t in_use = pool->stats().bytes_in_use;
  try {
    b.load(path, "model-A");
    FAIL() << "expected KvBudgetExceeded";
  } catch (const kv::KvBudgetExceeded& e) {
    EXPECT_NE(std::string(e.what()).find("budget"), std::string::npos);
  }
  EXPECT_EQ(pool->stats().bytes_in_use, in_use);
  EXPECT_EQ(b.n_tokens(), 60);
  EXPECT_EQ(f.decode(b, 60, 5), f.decode(twin, 60, 5));
}

// Rewrites a version-2 file in another version's shape (tests only).
void rewrite(const std::string& from, const std::string& to, uint32_t version,
             const kv::KvShape& shape) {
  const gguf::GgufFile src = gguf::GgufFile::open(from);
  gguf::GgufWriter w;
  for (const auto& [key, value] : src.metadata()) {
    if (key == "turbokv.session.version") continue;
    if (version == 1 && (key.find(".encoded") != std::string::npos ||
                         key.find("meta_") != std::string::npos || key == "turbokv.session.tokens"))
      continue;
    w.set(key, value);
  }
  w.set_u32("turbokv.session.version", version);
  uint64_t fnv = 0xcbf29ce484222325ull;
  auto add = [&](const std::string& name, std::string bytes) {
    for (unsigned char ch : bytes) fnv = (fnv ^ ch) * 0x100000001b3ull;
    w.add_tensor(name, DType::I8, {int64_t(bytes.size())}, bytes.data(), bytes.size());
  };
  for (int l = 0; l < shape.n_layers; ++l) {
    for (const char* area : {"sinks", "ring"})
      if (const auto* t = src.find_tensor(str("blk.", l, ".", area)))
        add(t->name, std::string(reinterpret_cast<const char*>(t->data), t->n_bytes));
    std::string pages;
    for (int i = 0; const auto* t = src.find_tensor(str("blk.", l, ".page.", i)); ++i)
      pages.append(reinterpret_cast<const char*>(t->data), t->n_bytes);
    if (!pages.empty()) add(str("blk.", l, ".pages"), pages);
  }
  char hex[20];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv));
  w.set_string("turbokv.session.checksum", hex);
  w.write(to);
}

TEST(SessionV2Test, VersionOneFilesStillLoadAndOtherVersionsAreRefusedByName) {
  Fixture f;
  const std::string dir = temp_dir();
  kv::KvCache a(kShape, k4v2());
  f.feed(a, 0, 170);
  a.save(dir + "/v2.tkvs", "model-A", sample_meta());
  rewrite(dir + "/v2.tkvs", dir + "/v1.tkvs", 1, kShape);
  rewrite(dir + "/v2.tkvs", dir + "/v7.tkvs", 7, kShape);

  kv::KvCache b(kShape, k4v2());
  EXPECT_EQ(b.load(dir + "/v1.tkvs", "model-A"), kv::SessionMeta{});
  EXPECT_EQ(b.n_tokens(), 170);
  EXPECT_EQ(f.decode(b, 170, 6), f.decode(a, 170, 6));

  kv::KvCache c(kShape, k4v2());
  try {
    c.load(dir + "/v7.tkvs", "model-A");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("version 7"), std::string::npos) << e.what();
  }
  EXPECT_EQ(c.n_tokens(), 0);
}

}  // namespace
}  // namespace tkv::test
