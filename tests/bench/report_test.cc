// Summaries, Markdown and report files from synthetic rows (no model).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "bench/memory_protocol.h"
#include "bench/plots.h"
#include "bench/report.h"
#include "bench/speed_protocol.h"
#include "test_util.h"

namespace tkv::bench {
namespace {

Json speed_row(const std::string& kv, bool f16, std::vector<std::pair<int64_t, double>> ms) {
  Json decode = Json::array();
  for (auto [depth, m] : ms)
    decode.push_back({{"depth", depth},
                      {"ms_per_token", {{"median", m}, {"min", m * 0.9}, {"max", m * 1.1}}},
                      {"tok_per_s", 1000 / m}});
  return {{"kv", kv},
          {"policy", "none"},
          {"f16_baseline", f16},
          {"threads", 2},
          {"status", "ok"},
          {"prefill", Json::array({{{"ctx", 512}, {"ttft_s", 0.5}, {"tok_per_s", 1024.0}}})},
          {"decode", decode}};
}

TEST(BenchSpeedSummary, CrossoverIsTheDepthFromWhichItStaysFaster) {
  std::vector<Json> rows{
      speed_row("f16", true, {{0, 10}, {1024, 12}, {4096, 20}, {16384, 50}}),
      // Slower at 0, faster at 1K, slower at 4K, faster from 16K: crossover 16K.
      speed_row("a", false, {{0, 11}, {1024, 11}, {4096, 21}, {16384, 30}}),
      speed_row("b", false, {{0, 9}, {1024, 11}, {4096, 15}, {16384, 20}}),   // always faster
      speed_row("c", false, {{0, 12}, {1024, 13}, {4096, 25}, {16384, 60}}),  // never
  };
  const Json s = summarize_speed(SpeedOptions{}, rows);
  ASSERT_EQ(s["crossover"].size(), 4u);
  EXPECT_EQ(s["crossover"][0]["faster_than_f16_from_depth"], "baseline");
  EXPECT_EQ(s["crossover"][1]["faster_than_f16_from_depth"], 16384);
  EXPECT_EQ(s["crossover"][2]["faster_than_f16_from_depth"], 0);
  EXPECT_EQ(s["crossover"][3]["faster_than_f16_from_depth"], "never");
  // Per-depth ratio to f16.
  EXPECT_NEAR(s["decode"][7]["ratio_to_f16"].get<double>(), 30.0 / 50.0, 1e-12);
  const std::string md = speed_markdown(s);
  EXPECT_NE(md.find("| a   | 2       | 16K"), std::string::npos) << md;
  EXPECT_NE(md.find("never"), std::string::npos);
}

Json memory_row(const std::string& kv, bool f16, int64_t ctx, double minus_model) {
  return {{"kv", kv},
          {"policy", "4+64"},
          {"f16_baseline", f16},
          {"ctx", ctx},
          {"status", "ok"},
          {"peak_rss_bytes", minus_model + 1000},
          {"model_resident_bytes", 1000},
          {"peak_rss_minus_model_bytes", minus_model},
          {"kv_persistent_bytes", minus_model / 2},
          {"k_bytes_per_token_head", 16.0},
          {"v_bytes_per_token_head", 16.0},
          {"kv_peak_scratch_bytes", 10},
          {"model_scratch_bytes", 20},
          {"phases",
           {{"prefill", {{"memory", {{"rss_bytes", 5}}}, {"tok_per_s", 100.0}}},
            {"decode", {{"memory", {{"peak_rss_bytes", 6}}}}}}}};
}

TEST(BenchMemorySummary, RatiosToF16AtTheSameContextAndOomRows) {
  std::vector<Json> rows{memory_row("f16", true, 4096, 4000),
                         memory_row("k4v2", false, 4096, 1000),
                         memory_row("f16", true, 8192, 8000),
                         {{"kv", "k4v2"},
                          {"policy", "4+64"},
                          {"ctx", 8192},
                          {"status", "oom"},
                          {"reason", "KV budget exceeded"}}};
  const Json s = summarize_memory(MemoryOptions{}, rows);
  EXPECT_DOUBLE_EQ(s["headline"][1]["ratio_to_f16"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(s["headline"][0]["ratio_to_f16"].get<double>(), 1.0);
  EXPECT_EQ(s["headline"][3]["status"], "oom");
  const std::string md = memory_markdown(s);
  EXPECT_NE(md.find("oom: KV budget exceeded"), std::string::npos) << md;
  EXPECT_NE(md.find("0.250x"), std::string::npos) << md;
}

TEST(BenchReport, FilesAreWrittenAndParseable) {
  const std::string dir = tkv::test::temp_dir() + "/out";
  ReportHeader h;
  h.command_line = {"turbokv", "bench", "memory"};
  h.threads = 2;
  h.mem_limit = {{"bytes", 0}, {"method", "none"}, {"fallback_reason", ""}};
  Json report = make_report(h);
  EXPECT_FALSE(report["machine"]["cpu_model"].get<std::string>().empty());
  EXPECT_TRUE(report["git"].contains("commit"));
  report["memory"] = summarize_memory(
      MemoryOptions{}, {memory_row("f16", true, 4096, 4e6), memory_row("k4v2", false, 4096, 1e6),
                        memory_row("f16", true, 8192, 8e6), memory_row("k4v2", false, 8192, 2e6)});
  report["speed"] =
      summarize_speed(SpeedOptions{}, {speed_row("f16", true, {{0, 10}, {1024, 12}}),
                                       speed_row("k4v2", false, {{0, 11}, {1024, 11}})});
  const std::string msg = write_report(report, dir);
  EXPECT_NE(msg.find("report.json"), std::string::npos);
  std::ifstream in(dir + "/report.json");
  const Json back = Json::parse(in);
  EXPECT_EQ(back["memory"]["rows"].size(), 4u);
  EXPECT_TRUE(std::filesystem::exists(dir + "/report.md"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/memory.gp"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/decode.gp"));
  if (find_in_path("gnuplot").empty()) GTEST_SKIP() << "gnuplot not installed: plots not drawn";
  EXPECT_GT(std::filesystem::file_size(dir + "/memory.png"), 1000u) << msg;
  EXPECT_GT(std::filesystem::file_size(dir + "/decode.png"), 1000u) << msg;
}

}  // namespace
}  // namespace tkv::bench
