// `bench batch` through the bench driver on stories260K: the report's
// decode rows and capacity counts, the printed lines, bad input.
#include <gtest/gtest.h>

#include "bench_test_util.h"
#include "test_util.h"

namespace tkv::bench {
namespace {

TEST(BenchBatch, ReportsDecodeRowsAndSequencesThatFit) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string out = ::tkv::test::temp_dir() + "/batch-report";
  const uint64_t budget = 1 << 20;
  const ChildResult r = test::run_bench(
      {"batch",   "-m",           model, "--kv",  "f16,f32", "--batch", "1,3",
       "--depth", "20",           "-t",  "1",     "--steps", "3",       "--kv-budget",
       "1M",      "--fit-tokens", "200", "--out", out,       "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("batch 1: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("batch 3: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fit f16: "), std::string::npos) << r.out;

  const Json report = test::read_json_file(out + "/report.json");
  const Json& section = report.at("batch");
  ASSERT_EQ(section.at("decode").size(), 4u);  // 2 configurations x 2 batch sizes
  for (const auto& d : section["decode"]) {
    EXPECT_GT(d.at("tok_per_s").get<double>(), 0) << d.dump();
    EXPECT_EQ(d.at("depth").get<int64_t>(), 20);
  }
  for (const auto& row : section.at("rows")) {
    ASSERT_EQ(row.at("status"), "ok") << row.dump();
    for (const auto& d : row.at("decode")) EXPECT_EQ(d.at("ms_per_step").at("n").get<int>(), 3);
  }
  ASSERT_EQ(section.at("fit").size(), 2u);
  int64_t fit_f16 = 0, fit_f32 = 0;
  for (const auto& f : section["fit"]) {
    const int64_t n = f.at("sequences").get<int64_t>();
    const uint64_t per = f.at("bytes_per_sequence").get<uint64_t>();
    EXPECT_EQ(f.at("budget_bytes").get<uint64_t>(), budget);
    EXPECT_EQ(f.at("tokens").get<int64_t>(), 200);
    ASSERT_GT(n, 0);
    // Measured: what was held fits the budget, one more would not.
    EXPECT_LE(uint64_t(n) * per, budget);
    EXPECT_GT(uint64_t(n + 1) * per, budget);
    (f.at("kv") == "f16" ? fit_f16 : fit_f32) = n;
  }
  // f32 stores twice the bytes of f16 per token.
  EXPECT_GE(fit_f16, 2 * fit_f32 - 1);
  EXPECT_LE(fit_f16, 2 * fit_f32 + 1);
}

TEST(BenchBatch, BudgetZeroSkipsTheCapacityCount) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string out = ::tkv::test::temp_dir() + "/batch-nofit";
  const ChildResult r = test::run_bench({"batch", "-m", model, "--kv", "f16", "--batch", "2", "-t",
                                         "1", "--kv-budget", "0", "--out", out, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json report = test::read_json_file(out + "/report.json");
  EXPECT_TRUE(report.at("batch").at("fit").empty());
  EXPECT_EQ(report["batch"]["decode"].size(), 1u);
  EXPECT_EQ(r.out.find("fit f16"), std::string::npos);
}

TEST(BenchBatch, BadInputIsExitCode2) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::vector<std::vector<std::string>> cases{
      {"batch"},                                      // no model
      {"batch", "-m", model, "--batch", "0"},         // batch size below 1
      {"batch", "-m", model, "--batch", "two"},       // not a number
      {"batch", "-m", model, "--depth", "lots"},      // bad token count
      {"batch", "-m", model, "--kv-budget", "much"},  // bad size
      {"batch", "-m", model, "--steps", "1"},         // < 3 timed steps
  };
  for (const auto& args : cases) {
    const ChildResult r = test::run_bench(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err;
    EXPECT_FALSE(r.err.empty());
  }
  const ChildResult help = test::run_bench({"batch", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--fit-tokens"), std::string::npos);
}

}  // namespace
}  // namespace tkv::bench
