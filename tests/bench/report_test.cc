// Summaries, Markdown and report files from synthetic rows (no model).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "bench/kernel_protocol.h"
#include "bench/memory_protocol.h"
#include "bench/plots.h"
#include "bench/quality_protocol.h"
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

// report.md opens with the provenance a published figure needs: the command
// line (the program by its name, a word with a space quoted so a shell reads
// it back), the machine's CPU model, the commit the binary was built from,
// and the date.
TEST(BenchReport, MarkdownOpensWithCommandMachineCommitAndDate) {
  ReportHeader h;
  h.command_line = {"/opt/tkv/bin/turbokv", "bench", "quality", "-m", "my model.gguf"};
  h.threads = 2;
  h.mem_limit = {{"bytes", 0}, {"method", "none"}, {"fallback_reason", ""}};
  const Json report = make_report(h);
  const std::string built = report["git"]["build_commit"].get<std::string>();
  EXPECT_FALSE(built.empty());
  const std::string md = report_markdown(report, {});
  const std::string cpu = report["machine"]["cpu_model"].get<std::string>();
  const std::string date = report["created_utc"].get<std::string>();
  ASSERT_EQ(date.size(), 20u) << date;  // 2026-01-02T03:04:05Z
  for (const std::string& line :
       {std::string("- command: `turbokv bench quality -m 'my model.gguf'`\n"),
        "- machine: " + cpu + ", ", "- commit: " + built, "- date: " + date + "\n"})
    EXPECT_NE(md.find(line), std::string::npos) << line << " not in:\n" << md;
  // In that order, before any section.
  EXPECT_LT(md.find("- command: "), md.find("- machine: "));
  EXPECT_LT(md.find("- machine: "), md.find("- commit: "));
  EXPECT_LT(md.find("- commit: "), md.find("- date: "));
  EXPECT_EQ(md.find("- command: "), md.find("turbokv bench report") + 22);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A kernel section as summarize_kernel() writes it: two configurations at
// three depths, head_dim 64.
Json kernel_section() {
  Json table = Json::array();
  for (const auto& [kv, us] : {std::pair<std::string, double>{"f16", 40}, {"k4v2", 25}})
    for (const int64_t depth : {1024, 4096, 16384})
      table.push_back({{"kv", kv},
                       {"head_dim", 64},
                       {"threads", 1},
                       {"status", "ok"},
                       {"depth", depth},
                       {"us_median", us * double(depth) / 1024},
                       {"us_min", us},
                       {"us_max", us},
                       {"kv_bytes_read", 1000},
                       {"gb_per_s", 2.0},
                       {"fraction_of_copy", 0.2},
                       {"ratio_to_f16", kv == "f16" ? 1.0 : 0.625}});
  return {{"options", {{"kv_heads", 8}, {"gqa", 4}}},
          {"copy_bandwidth_gb_per_s", {{"1", 10.0}}},
          {"table", table}};
}

TEST(BenchPlots, AxesShowTheDataHonestly) {
  const std::string dir = tkv::test::temp_dir() + "/plots";
  Json report = {{"model", {{"file", "m.gguf"}}}};
  // Two memory curves 16% apart: with an axis starting near 3.9 MiB the gap
  // would look several times larger than it is.
  report["memory"] = summarize_memory(
      MemoryOptions{},
      {memory_row("f16", true, 4096, 4.6e6), memory_row("k4v2", false, 4096, 4e6),
       memory_row("f16", true, 8192, 4.7e6), memory_row("k4v2", false, 8192, 4.1e6)});
  report["speed"] =
      summarize_speed(SpeedOptions{}, {speed_row("f16", true, {{0, 10}, {1024, 12}, {4096, 14}})});
  report["kernel"] = kernel_section();
  std::filesystem::create_directories(dir);
  write_plots(report, dir);
  const std::string memory = read_text(dir + "/memory.gp");
  EXPECT_NE(memory.find("set yrange [0:*]"), std::string::npos) << memory;
  EXPECT_NE(memory.find("'4K' 4096"), std::string::npos) << memory;
  // Depth 0 is drawn at 1 on the log axis: the range starts below it.
  const std::string decode = read_text(dir + "/decode.gp");
  EXPECT_NE(decode.find("'0' 1, '1K' 1024, '4K' 4096"), std::string::npos) << decode;
  EXPECT_NE(decode.find("set xrange [0.5:8192]"), std::string::npos) << decode;
  EXPECT_NE(decode.find("set yrange [0:*]"), std::string::npos) << decode;
  // The kernel plot's log y axis: 1-2-5 tics, not gnuplot's bare powers of 2.
  const std::string kernel = read_text(dir + "/kernel_d64.gp");
  EXPECT_NE(kernel.find("set logscale y 10"), std::string::npos) << kernel;
  EXPECT_NE(kernel.find("'20' 20, '50' 50, '100' 100, '200' 200, '500' 500"), std::string::npos)
      << kernel;
  EXPECT_NE(kernel.find("'16K' 16384"), std::string::npos) << kernel;
  EXPECT_EQ(kernel.find("logscale xy 2"), std::string::npos) << kernel;
}

TEST(BenchTables, RatioColumnsSayWhatTheyCompareAndWhichWayIsBetter) {
  const std::string mem = memory_markdown(summarize_memory(
      MemoryOptions{}, {memory_row("f16", true, 4096, 4e6), memory_row("k4v2", false, 4096, 1e6)}));
  EXPECT_NE(mem.find("peak - model vs f16 (lower is better)"), std::string::npos) << mem;
  const std::string speed = speed_markdown(summarize_speed(
      SpeedOptions{}, {speed_row("f16", true, {{0, 10}}), speed_row("k4v2", false, {{0, 11}})}));
  EXPECT_NE(speed.find("time vs f16 (lower is better)"), std::string::npos) << speed;
  const std::string kernel = kernel_markdown(kernel_section());
  EXPECT_NE(kernel.find("time vs f16 (lower is better)"), std::string::npos) << kernel;
  EXPECT_NE(kernel.find("share of copy bandwidth (higher is better)"), std::string::npos) << kernel;
  for (const std::string& md : {mem, speed, kernel})
    EXPECT_EQ(md.find("| vs f16 "), std::string::npos) << md;
}

// The quality table speaks of the user's run only: no reference figures from
// elsewhere and no pass/fail verdicts, whatever the model.
TEST(BenchTables, QualityReportHasNoReferenceColumnOrVerdict) {
  QualityOptions q;
  const Json row = {{"kv", "k4v2"},
                    {"policy", "4+64"},
                    {"status", "ok"},
                    {"kv_describe", "k=tq4 v=tq2 sinks=4 residual=64 window=0"},
                    {"model", {{"file", "tkv-test-23M.gguf"}}},
                    {"bits_k", 4.5},
                    {"bits_v", 2.5},
                    {"ppl", 10.0},
                    {"baseline_ppl", 9.9},
                    {"ppl_delta_pct", 1.0},
                    {"kl", {{"mean", 0.02}, {"stderr", 0.001}, {"p99", 0.1}, {"max", 0.3}}},
                    {"top1_agreement", 0.9}};
  const Json section = summarize_quality(q, {row});
  EXPECT_FALSE(section.contains("targets"));
  const std::string md = quality_markdown(section);
  for (const char* word : {"reference", "issue", "Target", "MISSED", "met"})
    EXPECT_EQ(md.find(word), std::string::npos) << word << "\n" << md;
  EXPECT_NE(md.find("mean KL vs f16 (lower is better)"), std::string::npos) << md;
}

}  // namespace
}  // namespace tkv::bench
