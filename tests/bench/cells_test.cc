// The memory, speed, quality and kernel cells, run in-process on
// stories260K with tiny settings: structure and sanity of the numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "bench/cell.h"
#include "bench/kv_configs.h"
#include "bench_test_util.h"
#include "kv/codec/codec.h"
#include "test_util.h"

namespace tkv::bench {
namespace {

using test::cell_request;

// Persistent KV bytes the store must report for `n` tokens, from the
// codecs' page layouts and the policy (sinks and residual in f16 areas of
// whole 16-token slots, pages of `page` tokens for everything older).
uint64_t expected_kv_bytes(const kv::KvConfig& c, int n_layers, int n_kv, int hd, int64_t n) {
  auto codec = [&](const kv::CodecSpec& s) {
    const bool rot = s.rotate || s.kind == kv::CodecKind::TQ;
    return kv::make_codec(s, hd, rot ? std::make_shared<const kv::Rotation>(hd, 1) : nullptr);
  };
  const int S = c.effective_sinks(), R = c.effective_residual(), P = c.page_tokens;
  const auto f16 = codec(kv::CodecSpec{kv::CodecKind::F16});
  auto area = [&](int tokens) -> uint64_t {
    if (tokens <= 0) return 0;
    return uint64_t(f16->page_bytes((tokens + 15) / 16 * 16)) * 2 * n_kv;
  };
  const int64_t paged = std::max<int64_t>(0, n - R - S);
  const uint64_t pages = uint64_t((paged + P - 1) / P);
  const uint64_t page_bytes =
      uint64_t(n_kv) * (codec(c.k)->page_bytes(P) + codec(c.v)->page_bytes(P));
  return uint64_t(n_layers) * (pages * page_bytes + area(S) + area(R));
}

class BenchCells : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = ::tkv::test::model_path("stories260K.gguf");
    if (model_.empty())
      TKV_MISSING_FIXTURE << "fixture stories260K.gguf not found under "
                          << ::tkv::test::models_dir();
  }
  std::string model_;
};

// A cell loads the model as the request says (--mmap / --no-mmap travel as
// "weights") and reports it; the copy's resident bytes are the whole file
// (its last 2 MiB page included), and an unknown choice is a failed cell.
TEST_F(BenchCells, MemoryCellHoldsTheWeightsAsAskedAndSaysSo) {
  for (const std::string weights : {"map", "copy"}) {
    Json req = cell_request("memory", model_, "f16");
    req["ctx"] = 32;
    req["weights"] = weights;
    const Json r = run_cell(req);
    ASSERT_EQ(r["status"], "ok") << weights << ": " << r.dump();
    const uint64_t file = r["model_file_bytes"].get<uint64_t>();
    const uint64_t resident = r["model_resident_bytes"].get<uint64_t>();
    if (weights == "map") {
      EXPECT_EQ(r["model"]["file_memory"], "mapped");
      EXPECT_LE(resident, file + 4096);
    } else {
      EXPECT_EQ(r["model"]["file_memory"], "read into 2 MiB pages");
      EXPECT_GE(resident, file);
      EXPECT_LE(resident, (file + (2u << 20) - 1) / (2u << 20) * (2u << 20));
    }
  }
  Json req = cell_request("memory", model_, "f16");
  req["ctx"] = 32;
  req["weights"] = "huge";
  const Json r = run_cell(req);
  EXPECT_EQ(r["status"], "failed") << r.dump();
  EXPECT_NE(r.dump().find("weights: 'huge' is not auto, map or copy"), std::string::npos)
      << r.dump();
}

TEST_F(BenchCells, MemoryKvBytesAreExactlyTheLayoutsAndRssExceedsTheModel) {
  for (const std::string kv : {"f16", "k4v2", "tq3/tq1:s2+r16", "k4v2:none"}) {
    Json req = cell_request("memory", model_, kv);
    req["ctx"] = 300;
    req["decode_tokens"] = 3;
    const Json r = run_cell(req);
    ASSERT_EQ(r["status"], "ok") << kv << ": " << r.dump();
    const kv::KvConfig c = cli::parse_kv_spec(kv, {}).config;
    const Json& m = r["model"];
    EXPECT_EQ(r["tokens"], 303);
    EXPECT_EQ(r["kv_persistent_bytes"].get<uint64_t>(),
              expected_kv_bytes(c, m["n_layers"], m["n_kv_heads"], m["head_dim"], 303))
        << kv;
    // The process held the model's resident pages and the KV at once.
    EXPECT_GE(r["peak_rss_bytes"].get<uint64_t>(),
              r["model_resident_bytes"].get<uint64_t>() + r["kv_persistent_bytes"].get<uint64_t>());
    EXPECT_GT(r["model_resident_bytes"].get<uint64_t>(), 0u);
    EXPECT_LE(r["model_resident_bytes"].get<uint64_t>(),
              r["model_file_bytes"].get<uint64_t>() + 4096);
    EXPECT_GT(r["phases"]["prefill"]["seconds"].get<double>(), 0);
    EXPECT_GT(r["phases"]["prefill"]["tok_per_s"].get<double>(), 0);
    EXPECT_GT(r["phases"]["decode"]["seconds"].get<double>(), 0);
    EXPECT_GT(r["kv_peak_scratch_bytes"].get<uint64_t>(), 0u);
    EXPECT_GT(r["model_scratch_bytes"].get<uint64_t>(), 0u);
    EXPECT_EQ(
        r["peak_scratch_bytes"].get<uint64_t>(),
        r["kv_peak_scratch_bytes"].get<uint64_t>() + r["model_scratch_bytes"].get<uint64_t>());
    uint64_t layers = 0;
    for (const auto& b : r["kv_layer_bytes"]) layers += b.get<uint64_t>();
    EXPECT_EQ(layers, r["kv_persistent_bytes"].get<uint64_t>());
  }
}

TEST_F(BenchCells, QuantizedCacheIsSmallerThanF16) {
  Json f16 = cell_request("memory", model_, "f16"),
       k4 = cell_request("memory", model_, "k4v2:none");
  f16["ctx"] = k4["ctx"] = 448;
  const Json a = run_cell(f16), b = run_cell(k4);
  ASSERT_EQ(a["status"], "ok");
  ASSERT_EQ(b["status"], "ok");
  EXPECT_LT(b["kv_persistent_bytes"].get<uint64_t>() * 2, a["kv_persistent_bytes"].get<uint64_t>());
}

TEST_F(BenchCells, MemoryLimitBecomesAKvBudgetAndAnOomResult) {
  Json req = cell_request("memory", model_, "f16");
  req["ctx"] = 400;
  // Just above the model file: the KV pages cannot fit next to it.
  req["mem_limit_bytes"] = uint64_t(1185376 + 4096);
  const Json r = run_cell(req);
  EXPECT_EQ(r["status"], "oom") << r.dump();
  EXPECT_NE(r["reason"].get<std::string>().find("KV budget"), std::string::npos);
}

// A budget item: the same stored bytes as without it, the pages over the
// cap in the page file of a temporary directory that is gone afterwards.
TEST_F(BenchCells, BudgetItemSpillsPagesAndRemovesItsDirectory) {
  Json dense = cell_request("memory", model_, "f16");
  dense["ctx"] = 400;
  Json capped = cell_request("memory", model_, "f16:budget32K");
  capped["ctx"] = 400;
  const Json a = run_cell(dense), b = run_cell(capped);
  ASSERT_EQ(a["status"], "ok") << a.dump();
  ASSERT_EQ(b["status"], "ok") << b.dump();
  EXPECT_TRUE(a["kv_ram"]["spill"].is_null());
  EXPECT_EQ(a["kv_page_bytes_on_disk"], 0);
  EXPECT_EQ(b["kv_persistent_bytes"], a["kv_persistent_bytes"]);
  EXPECT_EQ(b["kv_ram"]["ram_budget_bytes"], 32 * 1024);
  // 400 f16 tokens of 5 layers x 4 heads x 8 dims: 160 KiB, well over 32 KiB.
  EXPECT_GT(b["kv_page_bytes_on_disk"].get<uint64_t>(), 64u * 1024);
  EXPECT_GT(b["kv_disk"]["spill_writes"].get<int64_t>(), 0);
  const std::string dir = b["kv_ram"]["spill"]["dir"].get<std::string>();
  EXPECT_NE(dir.find("turbokv-spill-"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
}

// --fill synthetic: depths without a forward pass over the prompt; with
// selection attention reads fewer pages than dense, with a cap most of them
// come back from disk; attention time and peak RSS per depth.
TEST_F(BenchCells, SpeedSyntheticFillWithSelectionAndACap) {
  std::map<std::string, Json> rows;
  for (const char* kv : {"f16", "f16:sel256", "f16:budget400K"}) {
    Json req = cell_request("speed", model_, kv);
    req["ctx"] = Json::array();
    req["depths"] = {2000};
    req["warmup"] = 1;
    req["steps"] = 3;
    req["fill"] = "synthetic";
    rows[kv] = run_cell(req);
    ASSERT_EQ(rows[kv]["status"], "ok") << rows[kv].dump();
    EXPECT_TRUE(rows[kv]["prefill"].empty());
    EXPECT_EQ(rows[kv]["fill"], "synthetic");
    const Json& d = rows[kv]["decode"][0];
    EXPECT_EQ(d["depth_actual"], 2000);
    EXPECT_GT(d["attention_ms_per_token"]["median"].get<double>(), 0);
    EXPECT_GT(d["peak_rss_bytes"].get<uint64_t>(), 0u);
  }
  const Json& dense = rows["f16"]["decode"][0]["kv_read_per_token"];
  const Json& sel = rows["f16:sel256"]["decode"][0]["kv_read_per_token"];
  const Json& cap = rows["f16:budget400K"]["decode"][0]["kv_read_per_token"];
  // ~2000 f16 tokens of 5 layers x K and V x 4 heads x 8 x 2 B, read whole
  // (in whole 64-token pages).
  EXPECT_NEAR(dense["kv_bytes"].get<double>(), 640 * 2001.0, 640 * 64.0);
  EXPECT_EQ(dense["disk_bytes"], 0.0);
  EXPECT_TRUE(dense["selected_page_fraction"].is_null());
  // Three of five layers select 256 of ~2000 tokens (plus the newest page);
  // a synthetic fill is written in 512-token chunks, which the cap must hold.
  EXPECT_LT(sel["selected_page_fraction"].get<double>(), 0.5);
  EXPECT_LT(sel["kv_bytes"].get<double>(), dense["kv_bytes"].get<double>()) << sel.dump();
  EXPECT_GT(cap["disk_bytes"].get<double>(), 0.5 * cap["kv_bytes"].get<double>()) << cap.dump();
  EXPECT_GT(cap["pages_read_back"].get<double>(), 0);
  EXPECT_GT(rows["f16:budget400K"]["decode"][0]["kv_page_bytes_on_disk"].get<uint64_t>(), 0u);
}

TEST_F(BenchCells, SpeedTimingsArePositiveAndOrdered) {
  Json req = cell_request("speed", model_, "k4v2");
  req["ctx"] = {64, 200};
  req["depths"] = {0, 128};
  req["warmup"] = 1;
  req["steps"] = 3;
  const Json r = run_cell(req);
  ASSERT_EQ(r["status"], "ok") << r.dump();
  ASSERT_EQ(r["prefill"].size(), 2u);
  EXPECT_EQ(r["prefill"][0]["ctx"], 64);
  EXPECT_GT(r["prefill"][0]["ttft_s"].get<double>(), 0);
  EXPECT_GT(r["prefill"][1]["ttft_s"].get<double>(), r["prefill"][0]["ttft_s"].get<double>());
  ASSERT_EQ(r["decode"].size(), 2u);
  for (const auto& d : r["decode"]) {
    const auto& ms = d["ms_per_token"];
    EXPECT_EQ(d["samples_ms"].size(), 3u);
    EXPECT_GT(ms["min"].get<double>(), 0);
    EXPECT_LE(ms["min"].get<double>(), ms["median"].get<double>());
    EXPECT_LE(ms["median"].get<double>(), ms["max"].get<double>());
  }
  EXPECT_EQ(r["decode"][0]["depth_actual"], 1);  // depth 0 starts from BOS alone
  EXPECT_EQ(r["decode"][1]["depth_actual"], 128);
}

TEST_F(BenchCells, QualityOfF16AgainstF16IsExactAndQuantizedIsNot) {
  const std::string text = test::write_story_text(::tkv::test::temp_dir());
  auto quality = [&](const std::string& kv) {
    Json req = cell_request("quality", model_, kv);
    req["text_file"] = text;
    req["window_tokens"] = 128;
    req["windows"] = 2;
    req["baseline"] = "f16";
    return run_cell(req);
  };
  const Json same = quality("f16");
  ASSERT_EQ(same["status"], "ok") << same.dump();
  EXPECT_EQ(same["kl"]["mean"].get<double>(), 0.0);
  EXPECT_EQ(same["kl"]["max"].get<double>(), 0.0);
  EXPECT_EQ(same["top1_agreement"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(same["ppl"].get<double>(), same["baseline_ppl"].get<double>());
  EXPECT_EQ(same["n_scored"], 2 * 63);  // positions 64..126 of each window
  EXPECT_GT(same["ppl"].get<double>(), 1.0);
  EXPECT_EQ(same["kl_samples"].size(), 2u * 63);

  const Json k4 = quality("k4v2:none");
  ASSERT_EQ(k4["status"], "ok") << k4.dump();
  EXPECT_GT(k4["kl"]["mean"].get<double>(), 0.0);
  EXPECT_GE(k4["kl"]["max"].get<double>(), k4["kl"]["p99"].get<double>());
  // A share of the scored positions: agreements / n_scored.
  const double agree = k4["top1_agreement"].get<double>() * k4["n_scored"].get<double>();
  EXPECT_NEAR(agree, std::round(agree), 1e-6) << k4["top1_agreement"];
  EXPECT_DOUBLE_EQ(k4["baseline_ppl"].get<double>(), same["ppl"].get<double>());
}

TEST_F(BenchCells, QualityTextTooShortIsAFailedResultNotACrash) {
  const std::string dir = ::tkv::test::temp_dir();
  Json req = cell_request("quality", model_, "f16");
  req["text_file"] = test::write_story_text(dir, 1);
  req["window_tokens"] = 512;
  req["windows"] = 4;
  const Json r = run_cell(req);
  EXPECT_EQ(r["status"], "failed");
  EXPECT_NE(r["reason"].get<std::string>().find("too short"), std::string::npos) << r.dump();
}

TEST(BenchKernelCell, BytesReadFollowTheLayoutAndTimesArePositive) {
  Json req = {{"protocol", "kernel"}, {"kv", bench_kv_to_json(cli::parse_kv_spec("f16", {}))},
              {"head_dim", 64},       {"threads", {1, 2}},
              {"kv_heads", 2},        {"gqa", 2},
              {"depths", {64, 200}},  {"warmup", 1},
              {"steps", 3},           {"fill_ubatch", 48}};
  const Json r = run_cell(req);
  ASSERT_EQ(r["status"], "ok") << r.dump();
  ASSERT_EQ(r["depths"].size(), 4u);  // 2 depths x 2 thread counts
  // f16: 2 heads x (K + V) x 64 values x 2 bytes per token, at the depth
  // reached + the step's own token (1-thread steps come first and add 4).
  EXPECT_EQ(r["depths"][0]["kv_bytes_read"].get<uint64_t>(), 65u * 2 * 2 * 64 * 2);
  EXPECT_EQ(r["depths"][1]["kv_bytes_read"].get<uint64_t>(), 69u * 2 * 2 * 64 * 2);
  EXPECT_EQ(r["depths"][2]["kv_bytes_read"].get<uint64_t>(), 201u * 2 * 2 * 64 * 2);
  EXPECT_EQ(r["depths"][3]["threads"], 2);
  for (const auto& d : r["depths"]) {
    EXPECT_GT(d["us_per_token"]["median"].get<double>(), 0);
    EXPECT_GT(d["gb_per_s"].get<double>(), 0);
    EXPECT_EQ(d["samples_us"].size(), 3u);
  }
  req["kv"] = bench_kv_to_json(cli::parse_kv_spec("k4v2", {}));
  const Json q = run_cell(req);
  ASSERT_EQ(q["status"], "ok") << q.dump();
  EXPECT_LT(q["depths"][2]["kv_bytes_read"].get<uint64_t>(),
            r["depths"][2]["kv_bytes_read"].get<uint64_t>());
}

TEST(BenchCellProtocol, UnknownProtocolAndBadRequestsFailCleanly) {
  EXPECT_EQ(run_cell({{"protocol", "nope"}})["status"], "failed");
  EXPECT_EQ(run_cell({{"model", "x"}})["status"], "failed");
  const Json r = run_cell({{"protocol", "memory"},
                           {"model", "/nonexistent.gguf"},
                           {"ctx", 10},
                           {"kv", bench_kv_to_json(cli::parse_kv_spec("f16", {}))}});
  EXPECT_EQ(r["status"], "failed");
  EXPECT_NE(r["reason"].get<std::string>().find("nonexistent"), std::string::npos) << r.dump();
}

}  // namespace
}  // namespace tkv::bench
