// The bench command line: help, and bad input answered with one clear
// error line and exit code 2 (run through the bench driver).
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "bench_test_util.h"
#include "test_util.h"

namespace tkv::bench {
namespace {

size_t count_lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(BenchCli, HelpListsSubcommandsAndFlags) {
  const ChildResult top = test::run_bench({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.out.find("memory"), std::string::npos);
  EXPECT_NE(top.out.find("kernel"), std::string::npos);
  // `all` names what it runs: five of the seven.
  EXPECT_NE(top.out.find("memory, speed, recall, quality and kernel on a model (not batch\n"
                         "                or serve)"),
            std::string::npos)
      << top.out;
  const ChildResult mem = test::run_bench({"memory", "--help"});
  EXPECT_EQ(mem.exit_code, 0);
  EXPECT_NE(mem.out.find("--mem-limit"), std::string::npos);
  EXPECT_NE(mem.out.find("--ctx"), std::string::npos);
}

TEST(BenchCli, BadInputIsOneLineAndExitCode2) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::vector<std::vector<std::string>> cases{
      {},
      {"nope"},
      {"memory"},                                                       // no model
      {"memory", "-m", "/nonexistent/model.gguf"},                      // missing file
      {"memory", "-m", model, "--kv", "k9v9"},                          // unknown codec
      {"memory", "-m", model, "--ctx", "4m"},                           // bad size
      {"memory", "-m", model, "--bogus"},                               // unknown flag
      {"memory", "-m", model, "--mem-limit", "lots"},                   // bad limit
      {"speed", "-m", model, "--steps", "1"},                           // < 3 timed steps
      {"recall", "-m", model, "--facts", "2", "--fact-depths", "0.5"},  // depths != facts
      {"quality", "-m", model, "--text", "/nonexistent.txt"},
      {"cell", "--request", "not json"},
  };
  for (const auto& args : cases) {
    const ChildResult r = test::run_bench(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.exit_code, 2) << joined << "\n" << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << joined << "\n" << r.err;
    EXPECT_EQ(r.term_signal, 0) << joined;
  }
}

// The KV flags are the shared group of run and chat (one definition): their
// checks and messages, and -ctk/-ctv and --kv-budget, hold in bench too.
TEST(BenchCli, SharedKvFlagsNameTheFlag) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");  // 5 layers
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"memory", "-m", model, "--kv-page", "24"}, "--kv-page 24: must be a multiple of 16"},
      {{"memory", "-m", model, "--kv-sinks", "2000"}, "--kv-sinks: 2000 is out of range"},
      {{"memory", "-m", model, "--kv-layer-override", "9:k4v4"},
       "--kv-layer-override: layer 9 does not exist (the model has 5 layers)"},
      {{"memory", "-m", model, "--kv", "f16,k4v2:w32"},
       "--kv k4v2:w32: window 32 must be larger than the residual window (64 tokens)"},
      {{"memory", "-m", model, "--kv", "f16", "-ctk", "q8_0"}, "--kv and -ctk/-ctv"},
      {{"memory", "-m", model, "-ctk", "q3"}, "-ctk: unknown KV codec 'q3'"},
      {{"speed", "-m", model, "--kv-budget", "lots"}, "--kv-budget: "},
      {{"memory", "-m", model, "--kv", "f16:budgetlots"},
       "--kv f16:budgetlots: budget part needs a size, e.g. budget64M"},
      {{"quality", "-m", model, "--kv", "f16:budget1M"},
       "--kv f16:budget1M: budget items run in bench recall, speed and memory only"},
      {{"speed", "-m", model, "--fill", "random"}, "--fill random: use prefill or synthetic"},
      {{"speed", "-m", model, "--kv", "f16:budget1M+budget2M"},
       "--kv f16:budget1M+budget2M: more than one budget part"},
  };
  for (const auto& [args, message] : cases) {
    const ChildResult r = test::run_bench(args);
    EXPECT_EQ(r.exit_code, 2) << message << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  }
}

TEST(BenchCli, CtkCtvNameOneConfigurationAndKvBudgetLimitsEachCell) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string dir = ::tkv::test::temp_dir();
  const ChildResult one =
      test::run_bench({"memory", "-m", model, "-ctk", "q8_0", "-ctv", "tq2", "--ctx", "32", "-t",
                       "1", "--quiet", "--out", dir + "/a"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const Json a = test::read_json_file(dir + "/a/report.json")["memory"]["rows"];
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0]["kv"], "q8_0/tq2");
  EXPECT_EQ(a[0]["status"], "ok");
  // 1 KiB cannot hold one page: a result (an oom row, exit 0), not a failure.
  const ChildResult tight =
      test::run_bench({"memory", "-m", model, "--kv", "f16", "--ctx", "32", "-t", "1",
                       "--kv-budget", "1K", "--quiet", "--out", dir + "/b"});
  EXPECT_EQ(tight.exit_code, 0) << tight.err;
  const Json b = test::read_json_file(dir + "/b/report.json")["memory"]["rows"];
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0]["status"], "oom");
}

}  // namespace
}  // namespace tkv::bench

namespace tkv::bench {
namespace {

// `turbokv perplexity` lives in the real binary (shared KV flags of the CLI).
TEST(PerplexityCli, F16AgainstF16IsExactAndBadInputExits2) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string bin = ::tkv::test::turbokv_binary();
  if (::access(bin.c_str(), X_OK) != 0) GTEST_SKIP() << "turbokv binary not built: " << bin;
  const std::string dir = ::tkv::test::temp_dir();
  const std::string text = test::write_story_text(dir);
  const ChildResult r =
      run_child({bin, "perplexity", "-m", model, "-f", text, "--window-tokens", "128", "--windows",
                 "2", "--baseline", "f16", "-t", "1", "--json", dir + "/ppl.json"},
                {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("top-1 agreement 100.0%"), std::string::npos) << r.out;
  const Json j = test::read_json_file(dir + "/ppl.json");
  EXPECT_EQ(j["kl"]["mean"].get<double>(), 0.0);
  EXPECT_EQ(j["windows_scored"], 2);
  EXPECT_GT(j["ppl"].get<double>(), 1.0);
  const ChildResult k4 = run_child({bin,
                                    "perplexity",
                                    "-m",
                                    model,
                                    "-f",
                                    text,
                                    "--window-tokens",
                                    "128",
                                    "--windows",
                                    "2",
                                    "--baseline",
                                    "f16",
                                    "-t",
                                    "1",
                                    "--kv",
                                    "k4v2",
                                    "--kv-residual",
                                    "0",
                                    "--json",
                                    dir + "/k4.json"},
                                   {});
  ASSERT_EQ(k4.exit_code, 0) << k4.err;
  EXPECT_GT(test::read_json_file(dir + "/k4.json")["kl"]["mean"].get<double>(), 0.0);
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{bin, "perplexity", "-m", model},  // no -f
        {bin, "perplexity", "-m", model, "-f", "/nonexistent.txt"},
        {bin, "perplexity", "-m", model, "-f", text, "--kv", "k7v7"},
        {bin, "perplexity", "-m", model, "-f", text, "--baseline", "q8_0"},
        {bin, "perplexity", "-m", model, "-f", text, "--window-tokens", "100000"}}) {
    const ChildResult b = run_child(bad, {});
    EXPECT_EQ(b.exit_code, 2) << bad.back() << "\n" << b.err;
    EXPECT_EQ(count_lines(b.err), 1u) << b.err;
  }
  // A layer the model does not have: checked once it is loaded, naming the flag.
  const ChildResult layer =
      run_child({bin, "perplexity", "-m", model, "-f", text, "--kv-layer-override", "9:k4v4"}, {});
  EXPECT_EQ(layer.exit_code, 2) << layer.err;
  EXPECT_NE(layer.err.find("--kv-layer-override: layer 9 does not exist"), std::string::npos)
      << layer.err;
}

}  // namespace
}  // namespace tkv::bench
