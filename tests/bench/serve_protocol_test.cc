// `turbokv bench serve` through the real binary (its cells start `turbokv
// serve`) on stories260K: the report's fields, every request served, the
// largest client count within a budget, --long-prompt, --url against a
// running server, bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "bench/child_process.h"
#include "bench/serve_client.h"
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
  // each (prompts this short are one prefill chunk, not cached).
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
    EXPECT_TRUE(row.at("kv_used_peak_bytes").is_number_unsigned()) << row.dump();
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

// A budget that cannot hold one sequence (its fixed part and one prefill
// chunk) is refused when the server starts, with the numbers: the cell is a
// failed row with the server's message (exit 1), not requests refused one
// by one.
TEST(BenchServe, ABudgetThatHoldsNoSequenceIsRefusedAtStart) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string out = ::tkv::test::temp_dir() + "/serve-budget";
  const ChildResult r = run_turbokv_bench({"serve", "-m", model, "--kv", "f16", "--clients", "2",
                                           "--prompt-tokens", "70", "--gen-tokens", "4", "-t", "1",
                                           "--kv-budget", "1K", "--out", out, "--quiet"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("exited before it listened"), std::string::npos) << r.out;
  EXPECT_NE((r.out + r.err).find("--kv-budget 1.00 KiB cannot hold one sequence"),
            std::string::npos)
      << r.out << r.err;
}

// The bench driver has no `serve` command: the server exits before it
// listens, and the cell is a failed row with the server's error (exit 1).
TEST(BenchServe, AServerThatCannotStartIsAFailedCell) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const ChildResult r =
      test::run_bench({"serve", "-m", model, "--kv", "f16", "--clients", "1", "--prompt-tokens",
                       "8", "--gen-tokens", "2", "-t", "1", "--quiet"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("kv f16: failed: bench: the server ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(") exited before it listened"), std::string::npos) << r.out;
}

// --long-prompt: one more client (the server runs N + 1 sequences) sends a
// prompt of its own once the others stream; the row gives its TTFT and the
// others' gaps during its prefill, and every row the decode-phase tok/s.
TEST(BenchServe, LongPromptFiguresAndDecodeThroughput) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string out = ::tkv::test::temp_dir() + "/serve-long";
  const ChildResult r = run_turbokv_bench(
      {"serve", "-m", model, "--kv", "f16", "--clients", "2", "--prompt-tokens", "8",
       "--gen-tokens", "40", "--long-prompt", "80", "-t", "1", "--out", out, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("serve f16 clients 2 long prompt 80: TTFT "), std::string::npos) << r.out;
  const Json report = test::read_json_file(out + "/report.json");
  EXPECT_EQ(report.at("serve").at("options").at("long_prompt").get<int64_t>(), 80);
  const Json& row = report["serve"].at("rows").at(0);
  ASSERT_EQ(row.at("status"), "ok") << row.dump();
  EXPECT_EQ(row.at("requests_ok").get<int>(), 2) << row.at("errors").dump();
  EXPECT_GT(row.at("decode_tok_per_s").get<double>(), 0);
  const auto cmd = row.at("server_command").get<std::vector<std::string>>();
  const auto parallel = std::find(cmd.begin(), cmd.end(), "--parallel");
  ASSERT_NE(parallel, cmd.end());
  EXPECT_EQ(*(parallel + 1), "3");  // the two clients and the long prompt
  const Json& lp = row.at("long_prompt");
  EXPECT_EQ(lp.at("tokens").get<int64_t>(), 80);
  EXPECT_TRUE(lp.at("ok").get<bool>()) << lp.dump();
  EXPECT_GT(lp.at("ttft_ms").get<double>(), 0);
  EXPECT_TRUE(lp.at("others_itl_ms").contains("p99"));
  EXPECT_TRUE(lp.at("others_itl_outside_ms").contains("p50"));
  EXPECT_TRUE(lp.at("others_streaming_through").is_boolean());
  // The cells' table carries both.
  const Json& cell = report["serve"].at("cells").at(0);
  EXPECT_EQ(cell.at("long_prompt").at("tokens").get<int64_t>(), 80);
  EXPECT_GT(cell.at("decode_tok_per_s").get<double>(), 0);
  EXPECT_NE(read_text(out + "/report.md").find("decode tok/s"), std::string::npos);
}

// --url drives a server that is already running (here a `turbokv serve`
// this test started): one cell per client count, KV column "url", no peak
// RSS, and the server is left running. Each cell sends prompts of its own:
// the running server's prefix cache (which keeps every finished prompt)
// never serves a cell from an earlier cell's requests.
TEST(BenchServe, UrlDrivesARunningServer) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  ServerProcess server({::tkv::test::turbokv_binary(), "serve", "-m", model, "--port", "0", "-t",
                        "1", "--parallel", "2"},
                       60);
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  const std::string out = ::tkv::test::temp_dir() + "/serve-url";
  const ChildResult r =
      run_turbokv_bench({"serve", "-m", model, "--url", url + "/v1", "--clients", "1,2,2",
                         "--prompt-tokens", "20", "--gen-tokens", "5", "--out", out, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json report = test::read_json_file(out + "/report.json");
  const Json& section = report.at("serve");
  EXPECT_EQ(section.at("options").at("url"), url + "/v1");
  ASSERT_EQ(section.at("rows").size(), 3u);
  // 16-token pages: a 20-token prompt sent again would reuse its first 16.
  const auto at = ::tkv::bench::parse_server_url(url);
  EXPECT_EQ(::tkv::bench::fetch_metric(at, "turbokv_prefix_cache_hits_total"), 0.0);
  EXPECT_EQ(::tkv::bench::fetch_metric(at, "turbokv_prompt_tokens_total"), 5 * 20.0);
  for (const auto& row : section["rows"]) {
    ASSERT_EQ(row.at("status"), "ok") << row.dump();
    EXPECT_EQ(row.at("kv"), "url");
    EXPECT_EQ(row.at("requests_ok").get<int>(), row.at("clients").get<int>())
        << row.at("errors").dump();
    EXPECT_TRUE(row.at("server_peak_rss_bytes").is_null());
    EXPECT_TRUE(row.at("server_command").empty());
    EXPECT_TRUE(row.at("kv_used_peak_bytes").is_number()) << row.dump();  // turbokv's /metrics
  }
  EXPECT_NE(r.out.find("serve url clients 2: "), std::string::npos) << r.out;
  EXPECT_EQ(server.stop(), 0);  // it was still serving
}

// A --url nothing listens on: the cell fails with the reason, exit 1.
TEST(BenchServe, UrlWithNoServerIsAFailedCell) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const ChildResult r =
      run_turbokv_bench({"serve", "-m", model, "--url", "http://127.0.0.1:1", "--clients", "1",
                         "--prompt-tokens", "8", "--gen-tokens", "2", "--quiet"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("http://127.0.0.1:1 does not answer GET /health"), std::string::npos)
      << r.out;
}

// --capacity: one server per KV item gets distinct prompts one at a time
// until a cached prefix is evicted; k4v2 holds more of them than f16 in
// the same budget.
TEST(BenchServe, CapacityCountsThePrefixesABudgetHolds) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string out = ::tkv::test::temp_dir() + "/serve-capacity";
  // stories260K f16: 640 bytes a token, a 100-token prompt about 80 KiB of pages.
  const ChildResult r = run_turbokv_bench(
      {"serve", "-m", model, "--kv", "f16,k4v2", "--capacity", "--prompt-tokens", "100",
       "--gen-tokens", "1", "--kv-budget", "400K", "-t", "1", "--out", out, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("serve f16 capacity: "), std::string::npos) << r.out;
  const Json report = test::read_json_file(out + "/report.json");
  const Json& cap = report.at("serve").at("capacity");
  ASSERT_EQ(cap.size(), 2u);
  int held[2] = {0, 0};
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(cap[i].at("evicted").get<bool>()) << cap[i].dump();
    EXPECT_EQ(cap[i].at("error"), "");
    held[i] = cap[i].at("peak_prefixes_held").get<int>();
    EXPECT_GE(held[i], 1);
    EXPECT_EQ(cap[i].at("requests_sent").get<int>(), held[i] + 1) << cap[i].dump();
  }
  EXPECT_EQ(cap[0].at("kv"), "f16");
  EXPECT_GT(held[1], held[0]);  // k4v2 holds more
  EXPECT_TRUE(report["serve"].at("cells").empty());
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
       "4"},                                                                    // unknown codec
      {"serve", "-m", model, "--long-prompt", "0"},                             // no prompt
      {"serve", "-m", model, "--long-prompt", "many"},                          // not a number
      {"serve", "-m", model, "--prompt-tokens", "8", "--long-prompt", "126"},   // > trained 128
      {"serve", "-m", model, "--url", "https://127.0.0.1:8080"},                // no TLS
      {"serve", "-m", model, "--url", "http://127.0.0.1:port"},                 // bad port
      {"serve", "-m", model, "--url", "http://127.0.0.1:8080/api"},             // other path
      {"serve", "-m", model, "--url", "http://127.0.0.1:8080", "--kv", "f16"},  // server's own
      {"serve", "-m", model, "--url", "http://127.0.0.1:8080", "-ub", "16"},    // server's own
      {"serve", "-m", model, "--capacity-max", "4"},                            // no --capacity
      {"serve", "-m", model, "--capacity", "--url", "http://127.0.0.1:8080"},   // not external
      {"serve", "-m", model, "--capacity", "--capacity-max", "0"},              // below 1
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
