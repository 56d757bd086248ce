// `turbokv bench serve` through the real binary (its cells start `turbokv
// serve`) on stories260K: the report's fields, every request served, the
// largest client count within a budget, bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "bench/child_process.h"
#include "bench_test_util.h"
#include "test_util.h"

namespace tkv::bench {
namespace {

ChildResult run_turbokv_bench(const std::vector<std::string>& args) {
  std::vector<std::string> argv{::tkv::test::turbokv_binary(), "bench"};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildLimits limits;
  limits.timeout_seconds = 300;
  return run_child(argv, limits);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(BenchServe, TwoClientsAllServedWithTheReportFields) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string out = ::tkv::test::temp_dir() + "/serve-report";
  // 100-token prompts sharing their first 64 (one full page) and 6 tokens
  // each: the cached prefix puts pages in the pool.
  const ChildResult r = run_turbokv_bench({"serve",    "-m",           model, "--kv",
                                           "f16,k4v2", "--clients",    "1,2", "--prompt-tokens",
                                           "100",      "--gen-tokens", "6",   "--shared-prefix",
                                           "64",       "-t",           "1",   "-ub",
                                           "32",       "--out",        out,   "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("serve f16 clients 2: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("serve k4v2: largest N all served within"), std::string::npos) << r.out;

  const Json report = test::read_json_file(out + "/report.json");
  const Json& section = report.at("serve");
  ASSERT_EQ(section.at("rows").size(), 4u);  // 2 configurations x 2 client counts
  for (const auto& row : section["rows"]) {
    ASSERT_EQ(row.at("status"), "ok") << row.dump();
    const int clients = row.at("clients").get<int>();
    EXPECT_EQ(row.at("requests_ok").get<int>(), clients) << row.at("errors").dump();
    EXPECT_TRUE(row.at("all_succeeded").get<bool>());
    ASSERT_EQ(row.at("streams").size(), size_t(clients));
    for (const auto& s : row["streams"]) {
      EXPECT_EQ(s.at("http_status").get<int>(), 200);
      EXPECT_GT(s.at("ttft_ms").get<double>(), 0);
      // Greedy on a story model: 6 tokens unless it ended the story first.
      EXPECT_GE(s.at("completion_tokens").get<int64_t>(), 1);
      EXPECT_LE(s.at("completion_tokens").get<int64_t>(), 6);
      EXPECT_LT(s.at("itl_ms").size(), size_t(s["completion_tokens"].get<int64_t>()));
    }
    EXPECT_GT(row.at("generated_tokens").get<int64_t>(), 0);
    EXPECT_GT(row.at("tok_per_s").get<double>(), 0);
    EXPECT_EQ(row.at("ttft_ms").at("n").get<int>(), clients);
    EXPECT_LE(row["ttft_ms"]["p50"].get<double>(), row["ttft_ms"]["p99"].get<double>());
    EXPECT_GT(row.at("server_peak_rss_bytes").get<uint64_t>(), 1u << 20);
    EXPECT_GT(row.at("kv_used_peak_bytes").get<uint64_t>(), 0u);
    EXPECT_EQ(row.at("server_exit_status").get<int>(), 0);  // drained on SIGTERM
    // The server ran with N sequences at once and the -ub given here.
    const auto cmd = row.at("server_command").get<std::vector<std::string>>();
    const auto after = [&](const std::string& flag) {
      const auto it = std::find(cmd.begin(), cmd.end(), flag);
      return it == cmd.end() || it + 1 == cmd.end() ? std::string() : *(it + 1);
    };
    EXPECT_EQ(after("--parallel"), std::to_string(clients));
    EXPECT_EQ(after("-ub"), "32");
    EXPECT_EQ(after("--kv"), row.at("kv").get<std::string>());
  }
  ASSERT_EQ(section.at("cells").size(), 4u);
  ASSERT_EQ(section.at("capacity").size(), 2u);
  for (const auto& c : section["capacity"]) EXPECT_EQ(c.at("largest_clients_all_served"), 2);
  const std::string md = read_text(out + "/report.md");
  EXPECT_NE(md.find("aggregate tok/s"), std::string::npos);
}

TEST(BenchServe, ABudgetThatHoldsNoPromptServesNone) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string out = ::tkv::test::temp_dir() + "/serve-budget";
  const ChildResult r = run_turbokv_bench({"serve", "-m", model, "--kv", "f16", "--clients", "2",
                                           "--prompt-tokens", "70", "--gen-tokens", "4", "-t", "1",
                                           "--kv-budget", "1K", "--out", out, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;  // the cell gave a result: requests refused
  const Json report = test::read_json_file(out + "/report.json");
  const Json& row = report.at("serve").at("rows").at(0);
  EXPECT_EQ(row.at("requests_ok").get<int>(), 0);
  EXPECT_FALSE(row.at("all_succeeded").get<bool>());
  ASSERT_FALSE(row.at("errors").empty());
  EXPECT_NE(row["errors"][0].get<std::string>().find("budget"), std::string::npos)
      << row["errors"].dump();
  EXPECT_TRUE(report["serve"]["capacity"][0]["largest_clients_all_served"].is_null());
  EXPECT_NE(r.out.find("largest N all served within 1K: none"), std::string::npos) << r.out;
}

// The bench driver has no `serve` command: the server exits before it
// listens, and the cell is a failed row with the server's error (exit 1).
TEST(BenchServe, AServerThatCannotStartIsAFailedCell) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const ChildResult r =
      test::run_bench({"serve", "-m", model, "--kv", "f16", "--clients", "1", "--prompt-tokens",
                       "8", "--gen-tokens", "2", "-t", "1", "--quiet"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("kv f16: failed: bench serve: the server exited before it listened"),
            std::string::npos)
      << r.out;
}

TEST(BenchServe, BadInputIsExitCode2) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::vector<std::vector<std::string>> cases{
      {"serve"},                                                               // no model
      {"serve", "-m", model, "--clients", "0"},                                // below 1
      {"serve", "-m", model, "--clients", "two"},                              // not a number
      {"serve", "-m", model, "--prompt-tokens", "0"},                          // no prompt
      {"serve", "-m", model, "--gen-tokens", "lots"},                          // bad token count
      {"serve", "-m", model, "--prompt-tokens", "8", "--shared-prefix", "9"},  // longer than it
      {"serve", "-m", model, "--prompt-tokens", "120", "--gen-tokens", "64"},  // > trained 128
      {"serve", "-m", model, "--kv-budget", "much"},                           // bad size
      {"serve", "-m", model, "--kv", "k9v9", "--prompt-tokens", "8", "--gen-tokens",
       "4"},  // unknown codec
  };
  for (const auto& args : cases) {
    const ChildResult r = run_turbokv_bench(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err;
    EXPECT_NE(r.err.find("error: "), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("internal"), std::string::npos) << r.err;
  }
  const ChildResult help = run_turbokv_bench({"serve", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--shared-prefix"), std::string::npos);
}

}  // namespace
}  // namespace tkv::bench
