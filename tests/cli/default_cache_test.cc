// run, chat and serve without KV flags use one default cache, a compressed
// one (cli/common_flags.h: kDefaultKvCache), and each reports it: run in its
// summary line, chat in /stats, serve in its listening line.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <string>

#include "cli_runner.h"
#include "test_util.h"

namespace tkv::test {
namespace {

// The text after `from` up to the next `to` (or the end of the line).
std::string between(const std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  if (at == std::string::npos) return "";
  const size_t begin = at + from.size();
  size_t end = text.find(to, begin);
  end = std::min(end, text.find('\n', begin));
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

TEST(CliDefaultCache, RunChatAndServeReportTheSameCompressedCache) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const CliResult run = run_cli({"run", "-m", model, "-p", "Once", "-n", "2", "-t", "1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string from_run = summary_field(run.err, "kv");

  const CliResult chat = run_cli(
      {"chat", "-m", model, "-n", "2", "-t", "1", "--chat-template", "chatml"}, "Hi\n/stats\n");
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  const std::string from_chat = between(chat.out, " peak scratch; ", "\n");

  CliProcess serve({"serve", "-m", model, "--port", "0", "-t", "1"});
  ASSERT_TRUE(serve.running());
  ASSERT_TRUE(serve.wait_for(", budget ", /*in_stderr=*/false, 120)) << "no listening line";
  serve.send_signal(SIGTERM);
  const CliResult served = serve.finish(60);
  EXPECT_EQ(served.exit_code, 0) << served.err;
  const std::string from_serve = between(served.out, ", kv ", ", budget ");

  ASSERT_FALSE(from_run.empty()) << run.err;
  EXPECT_EQ(from_chat, from_run) << chat.out;
  EXPECT_EQ(from_serve, from_run) << served.out;
  // Compressed: neither half is a float cache.
  for (const char* plain : {"k=f16 ", "v=f16 ", "k=f32 ", "v=f32 "})
    EXPECT_EQ(from_run.find(plain), std::string::npos) << from_run;
}

}  // namespace
}  // namespace tkv::test
