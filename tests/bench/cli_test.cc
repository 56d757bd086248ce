// The bench command line: help, and bad input answered with one clear
// error line and exit code 2 (run through the bench driver).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tkv::bench
