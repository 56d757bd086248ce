// What the turbokv binary reads and writes at its edges: prompt files and
// standard input, standard output that cannot be written, output paths
// checked before the work, messages that start their own line, prefill
// progress, and the llama.cpp flags it does not have.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli_runner.h"
#include "gguf/gguf.h"
#include "test_util.h"

namespace tkv::test {
namespace {

// Exit code 2 and exactly one stderr line "turbokv: error: ..." containing `expect`.
void expect_one_line_error(const CliResult& r, const std::string& expect, int code = 2) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("turbokv: error: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(expect), std::string::npos) << lines[0];
}

TEST(CliInput, DirectoryAsPromptFileIsAnError) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string dir = temp_dir();
  for (const char* cmd : {"run", "tokenize"}) {
    SCOPED_TRACE(cmd);
    const CliResult r = run_cli({cmd, "-m", model, "-f", dir});
    expect_one_line_error(r, dir + ": is a directory");
    EXPECT_EQ(r.out, "");
  }
  const CliResult ppl = run_cli({"perplexity", "-m", model, "-f", dir});
  expect_one_line_error(ppl, "is a directory");
}

TEST(CliInput, DashReadsThePromptFromStandardInput) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const CliResult piped =
      run_cli({"run", "-m", model, "-f", "-", "--temp", "0", "-n", "8"}, "Lily and Ben");
  const CliResult inline_p =
      run_cli({"run", "-m", model, "-p", "Lily and Ben", "--temp", "0", "-n", "8"});
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out, inline_p.out);
  const CliResult ids = run_cli({"tokenize", "-m", model, "-f", "-", "--ids"}, "Lily and Ben");
  const CliResult ids_p = run_cli({"tokenize", "-m", model, "-p", "Lily and Ben", "--ids"});
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  EXPECT_EQ(ids.out, ids_p.out);
}

TEST(CliOutput, WriteErrorsOnStandardOutputExit1) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"run", "-m", model, "-p", "Once", "-n", "4", "--temp", "0"},
           {"tokenize", "-m", model, "-p", "Once upon a time"},
           {"inspect", model},
           {"synth", "--list"},
           {"run", "--help"},
           {"--version"},
       }) {
    SCOPED_TRACE(::testing::PrintToString(args));
    expect_one_line_error(run_cli_stdout_to(args, "/dev/full"), "cannot write to standard output",
                          1);
  }
}

TEST(CliOutput, SummaryAndErrorsStartOnTheirOwnLine) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  // -n 0: only the echoed prompt, which ends mid-line.
  const CliResult r = run_cli({"run", "-m", model, "-p", "Once upon", "-n", "0", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Once upon\n");
  EXPECT_EQ(r.err.rfind("prompt ", 0), 0u) << r.err;
}

// A copy of stories260K whose tensor `name` holds NaNs.
std::string model_with_nans(const std::string& model, const std::string& name) {
  const gguf::GgufFile file = gguf::GgufFile::open(model);
  const gguf::TensorInfo& t = file.require_tensor(name);
  std::ifstream in(model, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = size_t(file.data_offset() + t.offset);
  // All-ones bytes are NaN in f32 and f16 (and make a block scale NaN).
  std::memset(bytes.data() + at, 0xff, size_t(t.n_bytes));
  const std::string path = temp_dir() + "/nan-" + name + ".gguf";
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  return path;
}

TEST(CliOutput, NanActivationsNameTheLayerOnALineOfTheirOwn) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string ffn = model_with_nans(model, "blk.2.ffn_down.weight");
  const CliResult r = run_cli({"run", "-m", ffn, "-p", "Once upon", "-n", "4", "-t", "1"});
  expect_one_line_error(r, "the model file looks corrupt: NaN or Inf in layer 2 output");
  EXPECT_EQ(r.out, "Once upon\n");  // the echo is ended before the message
  const CliResult k = run_cli({"run", "-m", model_with_nans(model, "blk.1.attn_k.weight"), "-p",
                               "Once upon", "-n", "4", "-t", "1", "--kv", "k4v4"});
  expect_one_line_error(k, "NaN or Inf in layer 1 keys");
}

TEST(CliOutput, OutputPathsAreCheckedBeforeTheWork) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string dir = temp_dir();
  const std::string no_parent = dir + "/no-such-dir/out.gguf";
  const CliResult synth_dir = run_cli({"synth", "--like", "tiny", "--out", dir});
  expect_one_line_error(synth_dir, "--out: " + dir + ": is a directory");
  EXPECT_EQ(synth_dir.err.find("synth: "), std::string::npos) << "no progress before the check";
  expect_one_line_error(run_cli({"synth", "--like", "tiny", "--out", no_parent}), "does not exist");
  const CliResult cache =
      run_cli({"run", "-m", model, "-p", "Once upon a time", "-n", "4", "--prompt-cache", dir});
  expect_one_line_error(cache, "--prompt-cache: " + dir + ": is a directory");
  EXPECT_EQ(cache.out, "") << "checked before the prefill and the echo";
  if (::geteuid() != 0) {  // root writes anywhere
    const std::string locked = dir + "/locked";
    std::filesystem::create_directories(locked);
    std::filesystem::permissions(
        locked, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    expect_one_line_error(run_cli({"synth", "--like", "tiny", "--out", locked + "/m.gguf"}),
                          "cannot write in");
    std::filesystem::permissions(locked, std::filesystem::perms::owner_all);
  }
}

TEST(CliProgress, PrefillProgressOnRequestAndSilentOtherwise) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::vector<std::string> base = {"run", "-m", model, "-p", "Once upon a time there was",
                                         "-n",  "2",  "-ub", "2",  "--temp",
                                         "0",   "-t", "1"};
  // stderr is a pipe here: no progress by default.
  const CliResult plain = run_cli(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err_lines().size(), 1u) << plain.err;
  auto args = base;
  args.push_back("--progress");
  const CliResult shown = run_cli(args);
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(shown.out, plain.out);
  // 7 prompt tokens (BOS + 6) in chunks of 2: 2, 4, 6, 7 done.
  const auto lines = shown.err_lines();
  ASSERT_EQ(lines.size(), 5u) << shown.err;
  EXPECT_EQ(lines[0].rfind("prefill 2/7 tok, ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[3].rfind("prefill 7/7 tok, ", 0), 0u) << lines[3];
  EXPECT_NE(lines[3].find(" tok/s, left 0s"), std::string::npos) << lines[3];
  EXPECT_NE(lines[1].find("left ~"), std::string::npos) << lines[1];
  args.push_back("-q");
  expect_one_line_error(run_cli(args), "-q and --progress");
  auto quiet = base;
  quiet.push_back("--quiet");
  EXPECT_EQ(run_cli(quiet).err_lines().size(), 1u);
  // chat shows the prefill of each turn the same way.
  const CliResult chat = run_cli({"chat", "-m", model, "--temp", "0", "-n", "2", "-t", "1", "-ub",
                                  "4", "--progress", "--chat-template", "chatml"},
                                 "Hello there my friend\n");
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  EXPECT_NE(chat.err.find("\nprefill 4/"), std::string::npos) << chat.err;
}

TEST(CliProgress, OnATerminalTheBarIsRedrawnInPlaceAndErased) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::vector<std::string> base = {"run", "-m", model, "-p", "Once upon a time there was",
                                         "-n",  "2",  "-ub", "2",  "--temp",
                                         "0",   "-t", "1"};
  // A prompt of milliseconds: nothing drawn, even on a terminal.
  const CliResult quick = run_cli_stderr_on_terminal(base);
  ASSERT_EQ(quick.exit_code, 0) << quick.err;
  EXPECT_EQ(quick.err.find('\033'), std::string::npos) << quick.err;
  EXPECT_EQ(quick.err.rfind("prompt 7 tok", 0), 0u) << quick.err;
  // --progress: drawn from the first chunk, each time over the same line.
  auto args = base;
  args.push_back("--progress");
  const CliResult r = run_cli_stderr_on_terminal(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.rfind("\r\033[K|", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(" prefill 2/7 tok, "), std::string::npos) << r.err;
  const size_t erased = r.err.rfind("\r\033[K");
  ASSERT_NE(erased, std::string::npos);
  // The bar is erased; the summary takes its line.
  EXPECT_EQ(r.err.compare(erased + 4, 7, "prompt "), 0) << r.err;
  EXPECT_EQ(r.err.substr(0, erased).find('\n'), std::string::npos) << r.err;
  EXPECT_EQ(r.out, quick.out);
}

TEST(CliFlags, LlamaCppFlagsTurbokvLacksSaySo) {
  for (const char* flag : {"-b", "-ngl", "-e", "-nkvo", "-fa", "--mlock"}) {
    SCOPED_TRACE(flag);
    const CliResult r = run_cli({"run", "-m", "x.gguf", "-p", "hi", flag, "1"});
    expect_one_line_error(r, std::string(flag) + " is not supported by turbokv");
    EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;
  }
  expect_one_line_error(run_cli({"chat", "-m", "x.gguf", "-ngl", "99"}),
                        "-ngl is not supported by turbokv");
}

TEST(CliFlags, ReversePromptIsAStopStringInRun) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::vector<std::string> base = {
      "run", "-m", model, "-p", "Once upon a time", "-n", "40", "--temp", "0", "-t", "1"};
  const CliResult plain = run_cli(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const size_t at = plain.out.find(" girl", 16);
  ASSERT_NE(at, std::string::npos) << plain.out;
  for (const char* flag : {"--stop", "-r", "--reverse-prompt"}) {
    SCOPED_TRACE(flag);
    auto args = base;
    args.insert(args.end(), {flag, " girl"});
    const CliResult r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, plain.out.substr(0, at) + "\n");
    EXPECT_NE(summary_field(r.err, "generated").find("(stop string)"), std::string::npos) << r.err;
  }
}

TEST(CliFlags, KvSeedDefaultAsShownIsAccepted) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const CliResult help = run_cli({"run", "--help"});
  const size_t at = help.out.find("(default 0x");
  ASSERT_NE(at, std::string::npos) << help.out;
  const std::string shown = help.out.substr(at + 9, help.out.find(')', at) - at - 9);
  const std::vector<std::string> base = {"run",    "-m", model,  "-p",   "Once",          "-n", "6",
                                         "--temp", "0",  "--kv", "k4v4", "--kv-residual", "0"};
  auto with_seed = base;
  with_seed.insert(with_seed.end(), {"--kv-seed", shown});
  const CliResult r = run_cli(with_seed);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, run_cli(base).out);
}

TEST(CliWarnings, ContextAboveTrainingAndThreadsAboveCpus) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  // stories260K was trained on 128 tokens.
  const CliResult c = run_cli({"run", "-m", model, "-p", "Once", "-n", "1", "-c", "256"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(c.err_lines().size(), 2u) << c.err;
  EXPECT_NE(c.err.find("warning: -c 256 is above the model's trained context of 128"),
            std::string::npos)
      << c.err;
  const std::string too_many = std::to_string(std::thread::hardware_concurrency() + 1);
  const CliResult t = run_cli({"run", "-m", model, "-p", "Once", "-n", "1", "-t", too_many});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.err.find("warning: -t " + too_many + " is more than the "), std::string::npos)
      << t.err;
  EXPECT_EQ(summary_field(t.err, "threads"), too_many);
  // As many threads as CPUs: no warning.
  const std::string all = std::to_string(std::thread::hardware_concurrency());
  const CliResult fine = run_cli({"run", "-m", model, "-p", "Once", "-n", "1", "-t", all});
  EXPECT_EQ(fine.err.find("warning"), std::string::npos) << fine.err;
}

TEST(CliRunSummary, WindowSaysTokensHeldAndConsumed) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  // f16: no residual window that the 16 tokens would have to exceed.
  const CliResult r = run_cli({"run", "-m", model, "-p", "Once upon a time", "--temp", "0", "-n",
                               "40", "--kv", "f16", "--kv-window", "16", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 5 prompt tokens + 39 fed back consumed; the window holds the newest 16.
  EXPECT_NE(summary_field(r.err, "KV").find("16 tokens held of 44 consumed"), std::string::npos)
      << r.err;
}

TEST(CliInspect, HelpListsModelOnly) {
  const CliResult r = run_cli({"inspect", "--help"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("usage: turbokv inspect MODEL [--all] [--model-only]"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  --model-only "), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tkv::test
