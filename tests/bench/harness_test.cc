// The bench harness end to end, through child processes of the bench
// driver: report files, plots, OOM rows under --mem-limit, crashed and
// timed-out cells as rows. Labelled no_asan: peak RSS and RLIMIT_AS are
// meaningless under ASan's shadow memory.
#include <gtest/gtest.h>

#include <filesystem>

#include "bench/cell.h"
#include "bench/plots.h"
#include "bench_test_util.h"
#include "test_util.h"

namespace tkv::bench {
namespace {

namespace fs = std::filesystem;

bool have_gnuplot() {
  return !find_in_path("gnuplot").empty();
}

TEST(BenchHarness, CrashesSignalsTimeoutsAndGarbageBecomeRows) {
  // A "binary" that ignores its arguments and misbehaves.
  auto runner = [](const std::string& script, double timeout) {
    return CellRunner({"/bin/sh", "-c", script, "cell"}, 0, timeout);
  };
  Json r = runner("kill -SEGV $$", 0).run({{"protocol", "memory"}});
  EXPECT_EQ(r["status"], "failed");
  EXPECT_NE(r["reason"].get<std::string>().find("signal 11"), std::string::npos) << r.dump();
  r = runner("kill -KILL $$", 0).run({});
  EXPECT_EQ(r["status"], "oom") << r.dump();
  // A cell past its time limit is stopped (not waited for): had it run to
  // the end it would have printed a result.
  r = runner("sleep 5; echo '{\"status\":\"ok\"}'", 0.3).run({});
  EXPECT_EQ(r["status"], "timeout") << r.dump();
  r = runner("echo 'not json'; echo 'it broke' >&2; exit 3", 0).run({});
  EXPECT_EQ(r["status"], "failed");
  EXPECT_NE(r["reason"].get<std::string>().find("it broke"), std::string::npos) << r.dump();
  r = runner("echo '{\"status\":\"ok\",\"x\":1}'", 0).run({});
  EXPECT_EQ(r["status"], "ok");
  EXPECT_EQ(r["x"], 1);
}

TEST(BenchHarness, MemoryReportWithPlots) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string out = ::tkv::test::temp_dir() + "/mem";
  const ChildResult r =
      test::run_bench({"memory", "-m", model, "--kv", "f16,k4v2", "--ctx", "256,448",
                       "--decode-tokens", "2", "-t", "1", "--out", out, "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| k4v2"), std::string::npos) << r.out;
  const Json rep = test::read_json_file(out + "/report.json");
  EXPECT_EQ(rep["command_line"][1], "bench");
  EXPECT_FALSE(rep["machine"]["cpu_flags"].get<std::string>().empty());
  // Which kernels the figures are of: the SIMD target (and any override).
  EXPECT_FALSE(rep["machine"]["simd_target"].get<std::string>().empty());
  EXPECT_TRUE(rep["machine"]["kernel_env"].is_string());
  ASSERT_EQ(rep["memory"]["rows"].size(), 4u);
  for (const auto& row : rep["memory"]["rows"]) {
    ASSERT_EQ(row["status"], "ok") << row.dump();
    // A fresh process each: peak RSS is the child's, which held the model's
    // resident pages and the KV at once.
    EXPECT_GE(
        row["peak_rss_bytes"].get<uint64_t>(),
        row["model_resident_bytes"].get<uint64_t>() + row["kv_persistent_bytes"].get<uint64_t>());
    EXPECT_GT(row["process"]["seconds"].get<double>(), 0);
  }
  EXPECT_TRUE(rep["memory"]["headline"][1].contains("ratio_to_f16"));
  EXPECT_TRUE(fs::exists(out + "/report.md"));
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot not installed: no PNG";
  EXPECT_GT(fs::file_size(out + "/memory.png"), 1000u);
}

TEST(BenchHarness, TooLowMemoryLimitGivesOomRowsNotACrash) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string out = ::tkv::test::temp_dir() + "/oom";
  // 8M: the process cannot even map its libraries. 28M with 32K tokens:
  // it runs (its libraries, HTTP and TLS ones included, take ~20M of address
  // space), but the KV pages (640 B/token in f16) cannot fit next to the model.
  struct Case {
    std::string limit, ctx, kv;
  };
  for (const auto& [limit, ctx, kv] : {Case{"8M", "448", "f16,k4v2"}, Case{"28M", "32k", "f16"}}) {
    const ChildResult r = test::run_bench({"memory", "-m", model, "--kv", kv, "--ctx", ctx, "-t",
                                           "1", "--mem-limit", limit, "--out", out, "-q"});
    ASSERT_EQ(r.exit_code, 0) << limit << ": " << r.err;
    const Json rep = test::read_json_file(out + "/report.json");
    for (const Json& row : rep["memory"]["rows"]) {
      EXPECT_EQ(row["status"], "oom") << limit << ": " << row.dump();
      EXPECT_FALSE(row["reason"].get<std::string>().empty());
    }
    EXPECT_NE(rep["mem_limit"]["method"], "none");
    EXPECT_NE(r.out.find("oom"), std::string::npos) << r.out;
  }
  const Json rep = test::read_json_file(out + "/report.json");
  // Under the address-space limit the system refuses an allocation (a KV
  // page, or whichever comes first): an out-of-memory row that says so (no
  // --kv-budget was set, so it must not read as a budget overrun).
  const std::string reason = rep["memory"]["rows"][0]["reason"].get<std::string>();
  EXPECT_TRUE(reason.find("out of memory") != std::string::npos ||
              reason.find("allocation failed") != std::string::npos)
      << reason;
  EXPECT_EQ(reason.find("budget"), std::string::npos) << reason;
  // The same cell without the limit runs.
  const ChildResult ok = test::run_bench({"memory", "-m", model, "--kv", "f16", "--ctx", "448",
                                          "-t", "1", "--mem-limit", "28M", "--out", out, "-q"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(test::read_json_file(out + "/report.json")["memory"]["rows"][0]["status"], "ok");
}

TEST(BenchHarness, SpeedCrossoverTable) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string out = ::tkv::test::temp_dir() + "/speed";
  const ChildResult r =
      test::run_bench({"speed", "-m", model, "--kv", "f16,k4v2", "--ctx", "128,256", "--depths",
                       "0,128", "--warmup", "1", "--steps", "3", "-t", "1,2", "--out", out, "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json rep = test::read_json_file(out + "/report.json");
  EXPECT_EQ(rep["speed"]["rows"].size(), 4u);  // 2 configurations x 2 thread counts
  EXPECT_EQ(rep["speed"]["decode"].size(), 8u);
  EXPECT_EQ(rep["speed"]["prefill"].size(), 8u);
  ASSERT_EQ(rep["speed"]["crossover"].size(), 4u);
  for (const auto& c : rep["speed"]["crossover"]) {
    const Json& f = c["faster_than_f16_from_depth"];
    EXPECT_TRUE(f.is_number() || f == "never" || f == "baseline") << c.dump();
  }
  if (have_gnuplot()) {
    EXPECT_GT(fs::file_size(out + "/decode.png"), 1000u);
  }
}

TEST(BenchHarness, AllProtocolsWriteOneReport) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string dir = ::tkv::test::temp_dir();
  const std::string text = test::write_story_text(dir);
  const std::string out = dir + "/all";
  const ChildResult r = test::run_bench({"all",
                                         "-m",
                                         model,
                                         "-t",
                                         "1",
                                         "-q",
                                         "--out",
                                         out,
                                         "--kv",
                                         "f16,k4v2",
                                         "--ctx",
                                         "128,256",
                                         "--depths",
                                         "0,128",
                                         "--steps",
                                         "3",
                                         "--warmup",
                                         "1",
                                         "--recall-kv",
                                         "f16,k4v2:w128",
                                         "--recall-ctx",
                                         "400",
                                         "--filler",
                                         text,
                                         "--facts",
                                         "2",
                                         "--seeds",
                                         "1",
                                         "--turns",
                                         "3",
                                         "--multi-turn-kv",
                                         "f16",
                                         "--multi-turn-window",
                                         "128",
                                         "--quality-kv",
                                         "f16,k4v2:none",
                                         "--text",
                                         text,
                                         "--window-tokens",
                                         "128",
                                         "--windows",
                                         "1",
                                         "--kernel-kv",
                                         "f16,k4v2",
                                         "--kernel-depths",
                                         "64,128",
                                         "--head-dims",
                                         "64",
                                         "--kernel-threads",
                                         "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json rep = test::read_json_file(out + "/report.json");
  for (const char* s : {"memory", "speed", "recall", "quality", "kernel"}) {
    ASSERT_TRUE(rep.contains(s)) << s;
    EXPECT_FALSE(rep[s]["rows"].empty()) << s;
    for (const auto& row : rep[s]["rows"]) {
      EXPECT_EQ(row["status"], "ok") << s << ": " << row.dump();
    }
  }
  // Recall: the window probe fact is planted in every prompt; multi-turn runs f16 with and without
  // the window.
  EXPECT_EQ(rep["recall"]["multi_turn"].size(), 2u);
  const Json& labels = rep["recall"]["heatmap"]["labels"];
  EXPECT_NE(std::find(labels.begin(), labels.end(), Json("W128+")), labels.end()) << labels.dump();
  EXPECT_EQ(rep["quality"]["rows"][0]["kl"]["mean"].get<double>(), 0.0);
  EXPECT_EQ(rep["kernel"]["copy_bandwidth_gb_per_s"].size(), 1u);
  EXPECT_TRUE(fs::exists(out + "/report.md"));
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot not installed: no PNG";
  for (const char* png : {"memory.png", "decode.png", "recall.png", "kernel_d64.png"})
    EXPECT_GT(fs::file_size(out + "/" + png), 1000u) << png;
}

}  // namespace
}  // namespace tkv::bench
