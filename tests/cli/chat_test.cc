// `turbokv chat` driven through a pipe.
#include <gtest/gtest.h>

#include <signal.h>

#include <cstdlib>
#include <filesystem>

#include "cli_runner.h"
#include "test_util.h"

namespace tkv::test {
namespace {

std::vector<std::string> chat_args(const std::string& model) {
  // stories260K has no chat template: chatml is named.
  // stories260K's trained context is 128 tokens: room for a few turns.
  return {"chat",      "-m", model, "--temp",          "0",     "-n", "12", "-t", "1",
          "--verbose", "-c", "512", "--chat-template", "chatml"};
}

struct Turn {
  long prompt_tokens, generated, fed_back;
};

// The number right after `key` at `pos` or later in `text`; -1 if absent.
// (std::regex is avoided: GCC 12 warns inside it under the sanitizers.)
long number_after(const std::string& text, const std::string& key, size_t& pos) {
  const size_t at = text.find(key, pos);
  if (at == std::string::npos) return -1;
  pos = at + key.size();
  return std::strtol(text.c_str() + pos, nullptr, 10);
}

// The per-reply lines of --verbose: "[prompt P tok in S s, G generated, D fed back, ...]".
std::vector<Turn> turns(const std::string& err) {
  std::vector<Turn> out;
  size_t pos = 0;
  while (true) {
    Turn t;
    t.prompt_tokens = number_after(err, "[prompt ", pos);
    if (t.prompt_tokens < 0) break;
    t.generated = number_after(err, " s, ", pos);
    t.fed_back = number_after(err, " generated, ", pos);
    out.push_back(t);
  }
  return out;
}

long context_tokens(const std::string& stats) {
  size_t pos = 0;
  return number_after(stats, "context: ", pos);
}

TEST(CliChat, TurnsReuseTheCacheAndSaveLoadContinues) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string session = temp_dir() + "/chat.session";
  const CliResult a =
      run_cli(chat_args(model), "Tell me about Lily\nWhat did she see\n/stats\n/save " + session +
                                    "\nWho was there\n");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto t = turns(a.err);
  ASSERT_EQ(t.size(), 3u) << a.err;
  // Turn 2 feeds only its own text: less than turn 1's prompt plus its reply.
  EXPECT_LT(t[1].prompt_tokens, t[0].prompt_tokens + t[0].fed_back);
  // The context is exactly what was fed, turn by turn (nothing re-prefilled).
  EXPECT_EQ(context_tokens(a.out),
            t[0].prompt_tokens + t[0].fed_back + t[1].prompt_tokens + t[1].fed_back)
      << a.out;
  EXPECT_NE(a.err.find("saved "), std::string::npos) << a.err;
  ASSERT_TRUE(std::filesystem::exists(session));
  EXPECT_FALSE(std::filesystem::exists(session + ".json")) << "one session file, no sidecar";

  // A new process continues from the saved conversation: its reply to the
  // third message is the one the first process gave, and its context is the
  // saved one plus the new turn.
  const CliResult b = run_cli(chat_args(model), "/load " + session + "\nWho was there\n/stats\n");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::string loaded =
      "loaded " +
      std::to_string(t[0].prompt_tokens + t[0].fed_back + t[1].prompt_tokens + t[1].fed_back) +
      " tokens, 4 messages";
  EXPECT_NE(b.err.find(loaded), std::string::npos) << b.err;
  const auto tb = turns(b.err);
  ASSERT_EQ(tb.size(), 1u) << b.err;
  EXPECT_EQ(tb[0].prompt_tokens, t[2].prompt_tokens);
  const std::string reply = b.out.substr(0, b.out.find("context: "));
  ASSERT_GT(reply.size(), 5u);
  EXPECT_EQ(a.out.substr(a.out.size() - reply.size()), reply);
  EXPECT_EQ(context_tokens(b.out), context_tokens(a.out) + tb[0].prompt_tokens + tb[0].fed_back);
}

TEST(CliChat, CommandsClearHelpAndErrorsKeepTheChatGoing) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string missing = temp_dir() + "/none.session";
  const CliResult r =
      run_cli(chat_args(model), "/help\nHello\n/load " + missing +
                                    "\n/bogus\n/clear\n/stats\nHello\n/quit\nafter quit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("/save FILE"), std::string::npos);
  EXPECT_NE(r.err.find("turbokv: error: " + missing + ": session file does not exist"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("unknown command /bogus"), std::string::npos);
  EXPECT_NE(r.err.find("conversation cleared"), std::string::npos);
  EXPECT_NE(r.out.find("context: 0 of"), std::string::npos) << r.out;
  // After /clear the same message starts the same conversation: same reply.
  const auto t = turns(r.err);
  ASSERT_EQ(t.size(), 2u) << r.err;  // "after quit" is never read
  EXPECT_EQ(t[0].prompt_tokens, t[1].prompt_tokens);
}

TEST(CliChat, StopStringsEndTheReplyAndAreNotShown) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  auto args = chat_args(model);
  args[6] = "60";  // -n
  // The f16 cache: its reply to this message has a " the" early.
  args.insert(args.end(), {"--kv", "f16"});
  const CliResult plain = run_cli(args, "Tell me a story\n");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  // Stop at the first " the" the model writes (a common word in its stories).
  const size_t at = plain.out.find(" the");
  ASSERT_NE(at, std::string::npos) << plain.out;
  args.insert(args.end(), {"--stop", " the"});
  const CliResult stopped = run_cli(args, "Tell me a story\n");
  ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_EQ(stopped.out, plain.out.substr(0, at) + "\n");
  EXPECT_NE(stopped.err.find("stop string]"), std::string::npos) << stopped.err;
}

TEST(CliChat, ContextFullIsReported) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  auto args = chat_args(model);
  args.insert(args.end(), {"-c", "96"});
  const CliResult r = run_cli(args,
                              "Hello\nTell me a long story about a girl and her dog\n"
                              "And then what happened next in the story\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("context full"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/clear"), std::string::npos);
}

TEST(CliChat, LoadRejectsOtherKvSettings) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string session = temp_dir() + "/chat.session";
  auto saving = chat_args(model);
  saving.insert(saving.end(), {"--kv", "f16"});
  ASSERT_EQ(run_cli(saving, "Hello\n/save " + session + "\n").exit_code, 0);
  auto args = chat_args(model);
  args.insert(args.end(), {"--kv", "k4v2"});
  const CliResult r = run_cli(args, "/load " + session + "\n/stats\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("saved with KV settings"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("context: 0 of"), std::string::npos) << r.out;  // unchanged
}

TEST(CliChat, ExplicitTemplateAndSystemPrompt) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  auto args = chat_args(model);
  args.insert(args.end(), {"--chat-template", "llama3", "--system", "Be brief."});
  const CliResult r = run_cli(args, "Hi\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("template llama3"), std::string::npos) << r.err;
  args.insert(args.end(), {"--chat-template", "nonsense"});
  const CliResult bad = run_cli(args, "Hi\n");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("nonsense"), std::string::npos);
}

TEST(CliChat, AModelWithoutATemplateNeedsChatTemplate) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const CliResult r = run_cli({"chat", "-m", model, "-t", "1", "-n", "2"}, "Hi\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(
      r.err.find("the model has no chat template (tokenizer.chat_template); pass --chat-template"),
      std::string::npos)
      << r.err;
}

TEST(CliChat, CtrlCStopsTheReplyNotTheProgram) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  // No -n and a window policy: from this message stories260K generates
  // greedily without end (tested: no EOS in 100K tokens), until Ctrl-C.
  CliProcess chat({"chat", "-m", model, "--temp", "0", "-t", "1", "--kv", "f16", "--kv-window",
                   "64", "--verbose", "--chat-template", "chatml"});
  ASSERT_TRUE(chat.running());
  chat.write_stdin("Hello\n");
  ASSERT_TRUE(chat.wait_for(" the ", /*in_stderr=*/false, 120)) << "no reply started";
  chat.send_signal(SIGINT);
  ASSERT_TRUE(chat.wait_for("reply stopped (Ctrl-C)", /*in_stderr=*/true, 120));
  // Back at the prompt: the conversation goes on.
  chat.write_stdin("/stats\n");
  ASSERT_TRUE(chat.wait_for("last reply:", false, 60));
  const CliResult r = chat.finish(60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(", interrupted]"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("(interrupted)"), std::string::npos) << r.out;
}

TEST(CliChat, CtrlCAtThePromptExits) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  CliProcess chat(
      {"chat", "-m", model, "--temp", "0", "-t", "1", "-n", "4", "--chat-template", "chatml"});
  ASSERT_TRUE(chat.running());
  chat.write_stdin("Hello\n/stats\n");  // stdin stays open: the REPL waits for more
  ASSERT_TRUE(chat.wait_for("last reply:", /*in_stderr=*/false, 120));
  chat.send_signal(SIGINT);
  // Exits by itself, with its stdin still open.
  EXPECT_TRUE(chat.wait_exit(60));
  const CliResult r = chat.finish(60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(CliChat, SaveKeepsMessagesThatAreNotUtf8) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string session = temp_dir() + "/bytes.session";
  // A message with bytes that are not UTF-8 (a Latin-1 terminal, a cut
  // multi-byte character), and a system prompt with one too.
  auto args = chat_args(model);
  args.insert(args.end(), {"--system", "Be \xe9 brief"});
  const CliResult a =
      run_cli(args, "Hello \xff\xfe there \xe2\x82\n/save " + session + "\nWho was there\n");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.err.find("saved "), std::string::npos) << a.err;
  EXPECT_EQ(a.err.find("error"), std::string::npos) << a.err;
  EXPECT_EQ(turns(a.err).size(), 2u) << "the chat went on after /save";
  EXPECT_FALSE(std::filesystem::exists(session + ".json")) << "one session file, no sidecar";
  // A new process continues: same reply to the next message as the first gave.
  const CliResult b = run_cli(args, "/load " + session + "\nWho was there\n");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.err.find(" tokens, 3 messages from "), std::string::npos) << b.err;
  ASSERT_GT(b.out.size(), 5u);
  EXPECT_EQ(a.out.substr(a.out.size() - b.out.size()), b.out);
}

TEST(CliChat, SystemPromptHasLlamaCppSpellings) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  auto args = chat_args(model);
  const auto plain = turns(run_cli(args, "Hi\n").err);
  ASSERT_EQ(plain.size(), 1u);
  args.insert(args.end(), {"--system", "You are a storyteller."});
  const auto system = turns(run_cli(args, "Hi\n").err);
  ASSERT_EQ(system.size(), 1u);
  EXPECT_GT(system[0].prompt_tokens, plain[0].prompt_tokens);
  for (const char* flag : {"-sys", "--system-prompt"}) {
    SCOPED_TRACE(flag);
    args[args.size() - 2] = flag;
    const CliResult r = run_cli(args, "Hi\n");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto t = turns(r.err);
    ASSERT_EQ(t.size(), 1u) << r.err;
    EXPECT_EQ(t[0].prompt_tokens, system[0].prompt_tokens);
  }
}

TEST(CliChat, FailedSaveSaysWhyAndTheChatGoesOn) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string dir = temp_dir();
  // The path is a directory, or in a missing one: refused, nothing written.
  const CliResult r = run_cli(chat_args(model), "Hello\n/save " + dir + "\n/save " + dir +
                                                    "/missing/x.session\nTell me more\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("turbokv: error: " + dir + ": is a directory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/missing")) << r.err;
  EXPECT_EQ(turns(r.err).size(), 2u) << r.err;
}

TEST(CliChat, StatsAfterARefusedMessageShowNoReply) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  auto args = chat_args(model);
  args.insert(args.end(), {"-c", "24"});
  const CliResult r =
      run_cli(args, "Tell me a long story about a girl and her dog and the big red ball\n/stats\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("this message does not fit"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("last reply"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tkv::test
