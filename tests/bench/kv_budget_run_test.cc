// Page selection and RAM caps through the bench driver on stories260K:
// recall's comparisons with dense and a window of the same token budget,
// speed and memory rows with selection, a cap and its spill directory.
#include <gtest/gtest.h>

#include <filesystem>

#include "bench/plots.h"
#include "bench_test_util.h"
#include "test_util.h"

namespace tkv::bench {
namespace {

const Json* row_of(const Json& rows, const std::string& kv) {
  for (const auto& r : rows)
    if (r["kv"] == kv) return &r;
  return nullptr;
}

// f16 on stories260K: 640 B per token (5 layers x K and V x 4 heads x 8 x
// 2 B), so a 64 KiB cap holds 102 tokens' pages: a token budget of 64 (one
// page). -ub 64: a prefill chunk's pages of every layer fit in the cap.
TEST(BenchKvBudgetRun, RecallComparesSelectionAndCapsWithDenseAndAWindow) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string dir = ::tkv::test::temp_dir();
  const std::string text = test::write_story_text(dir);
  const ChildResult r =
      test::run_bench({"recall", "-m",        model,     "--kv",     "f16:sel128,f16:budget64K",
                       "--ctx",  "400",       "--facts", "2",        "--seeds",
                       "1",      "--turns",   "3",       "--filler", text,
                       "-ub",    "64",        "-t",      "1",        "-q",
                       "--out",  dir + "/out"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json rec = test::read_json_file(dir + "/out/report.json")["recall"];
  std::vector<std::string> labels;
  for (const auto& row : rec["rows"]) {
    labels.push_back(row["kv"].get<std::string>());
    EXPECT_EQ(row["status"], "ok") << row.dump();
  }
  EXPECT_EQ(labels, (std::vector<std::string>{"f16:sel128", "f16", "f16:w128", "f16:budget64K",
                                              "f16:w64"}));
  EXPECT_TRUE((*row_of(rec["rows"], "f16"))["added"].get<bool>());
  // The disk tier changes where pages are, not what attention reads: the
  // capped cache answers exactly as the uncapped one.
  const Json* capped = row_of(rec["rows"], "f16:budget64K");
  const Json* dense = row_of(rec["rows"], "f16");
  ASSERT_TRUE(capped && dense);
  EXPECT_EQ((*capped)["kv_ram"]["ram_budget_bytes"], 64 * 1024);
  EXPECT_FALSE((*capped)["kv_ram"]["spill"].is_null());
  ASSERT_EQ((*capped)["trials"].size(), (*dense)["trials"].size());
  for (size_t t = 0; t < (*dense)["trials"].size(); ++t)
    for (size_t f = 0; f < (*dense)["trials"][t]["facts"].size(); ++f)
      EXPECT_EQ((*capped)["trials"][t]["facts"][f]["answer"],
                (*dense)["trials"][t]["facts"][f]["answer"]);

  const Json& cmp = rec["comparisons"];
  ASSERT_EQ(cmp.size(), 2u);
  EXPECT_EQ(cmp[0]["item"], "f16:sel128");
  EXPECT_EQ(cmp[0]["kind"], "sel");
  EXPECT_EQ(cmp[0]["token_budget"], 128);
  EXPECT_EQ(cmp[0]["dense"], "f16");
  EXPECT_EQ(cmp[0]["window"], "f16:w128");
  EXPECT_EQ(cmp[1]["kind"], "budget");
  EXPECT_EQ(cmp[1]["token_budget"], 64);
  EXPECT_EQ(cmp[1]["window"], "f16:w64");
  for (const auto& c : cmp)
    for (const char* role : {"item", "dense", "window"}) {
      // 2 facts and a probe per window (a fact just past it): 4 questions.
      EXPECT_EQ(c["recall"][role]["total"], 4) << c.dump();
      EXPECT_EQ(c["past_window"][role]["total"], 1) << c.dump();
      EXPECT_FALSE(c["multi_turn_older_than_budget"][role].is_null()) << c.dump();
    }
  EXPECT_EQ(cmp[1]["recall"]["item"], cmp[1]["recall"]["dense"]);
  // Multi-turn: each group counted at its token budget.
  int at_budget = 0;
  for (const auto& m : rec["multi_turn"]) {
    EXPECT_EQ(m["status"], "ok") << m.dump();
    at_budget += m["cap"] == 128 || m["cap"] == 64;
  }
  EXPECT_EQ(at_budget, 6);
  const std::string md = test::read_text_file(dir + "/out/report.md");
  EXPECT_NE(md.find("Selection and RAM caps against dense and a window of the same token budget"),
            std::string::npos);
  EXPECT_NE(md.find("f16 (added)"), std::string::npos);
  // Two token budgets: the recall-vs-budget plot.
  if (!find_in_path("gnuplot").empty()) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/out/recall_budget.png"));
  }
}

// Speed with a synthetic fill: per depth, attention time, KV bytes read per
// token from RAM and from disk, pages on disk and peak RSS; no prefill rows.
TEST(BenchKvBudgetRun, SpeedRowsWithSelectionAndACapOnASyntheticFill) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string dir = ::tkv::test::temp_dir();
  const ChildResult r =
      test::run_bench({"speed",  "-m",        model,   "--kv",     "f16,f16:sel256,f16:budget400K",
                       "--fill", "synthetic", "--ctx", "2k",       "--depths",
                       "1k,2k",  "--steps",   "3",     "--warmup", "1",
                       "-t",     "1",         "-q",    "--out",    dir + "/out"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json speed = test::read_json_file(dir + "/out/report.json")["speed"];
  EXPECT_EQ(speed["options"]["fill"], "synthetic");
  EXPECT_TRUE(speed["prefill"].empty());
  ASSERT_EQ(speed["decode"].size(), 6u);
  for (const auto& d : speed["decode"]) {
    EXPECT_GT(d["attention_median_ms"].get<double>(), 0) << d.dump();
    EXPECT_GT(d["peak_rss_bytes"].get<uint64_t>(), 0u);
    const Json& rd = d["kv_read_per_token"];
    EXPECT_DOUBLE_EQ(rd["ram_bytes"].get<double>() + rd["disk_bytes"].get<double>(),
                     rd["kv_bytes"].get<double>());
    const bool capped = d["kv"] == "f16:budget400K";
    if (capped && d["depth"] == 2048) {
      EXPECT_GT(rd["disk_bytes"], 0.0) << d.dump();
    }
    if (!capped) {
      EXPECT_EQ(rd["disk_bytes"], 0.0) << d.dump();
    }
  }
  // The cap is not the f16 baseline: the uncapped f16 row is.
  for (const auto& row : speed["rows"]) EXPECT_EQ(row["f16_baseline"], row["kv"] == "f16");
  const std::string md = test::read_text_file(dir + "/out/report.md");
  EXPECT_NE(md.find("Prefill: none (--fill synthetic)."), std::string::npos);
  EXPECT_NE(md.find("KV read/token: RAM + disk"), std::string::npos);
}

// Memory at growing contexts with and without a cap: the capped rows keep
// pages on disk, and the peak-RSS plot shows both.
TEST(BenchKvBudgetRun, MemoryWithAndWithoutACapAtGrowingContexts) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string dir = ::tkv::test::temp_dir();
  const ChildResult r =
      test::run_bench({"memory", "-m", model, "--kv", "f16,f16:budget400K", "--fill", "synthetic",
                       "--ctx", "1k,4k", "-t", "1", "-q", "--out", dir + "/out"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json rows = test::read_json_file(dir + "/out/report.json")["memory"]["rows"];
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& row : rows) {
    ASSERT_EQ(row["status"], "ok") << row.dump();
    EXPECT_EQ(row["fill"], "synthetic");
    const bool capped = row["kv"] == "f16:budget400K";
    EXPECT_EQ(row["kv_ram"]["spill"].is_null(), !capped);
    // 4K f16 tokens: 2.5 MiB of pages, of which all but the cap is on disk.
    if (capped && row["ctx"] == 4096) {
      EXPECT_GT(row["kv_page_bytes_on_disk"].get<uint64_t>(), 2u << 20) << row.dump();
    }
    if (!capped) {
      EXPECT_EQ(row["kv_page_bytes_on_disk"], 0);
    }
  }
  if (!find_in_path("gnuplot").empty()) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/out/memory_rss.png"));
  }
}

}  // namespace
}  // namespace tkv::bench
