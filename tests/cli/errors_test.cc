// Bad input to the turbokv binary: one clear line on stderr, exit code 2,
// never a crash. And --help everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <vector>

#include "cli_runner.h"
#include "test_util.h"

namespace tkv::test {
namespace {

// Exit code 2, nothing on stdout, exactly one stderr line that starts with
// "turbokv: error: " and contains `expect`.
void expect_usage_error(const std::vector<std::string>& args, const std::string& expect) {
  SCOPED_TRACE("turbokv " + ::testing::PrintToString(args));
  const CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("turbokv: error: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(expect), std::string::npos) << lines[0];
}

TEST(CliErrors, NoCommandPrintsUsageAndExits2) {
  const CliResult r = run_cli({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("usage: turbokv COMMAND"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("turbokv: error: no command given"), std::string::npos) << r.err;
}

TEST(CliErrors, UnknownCommand) {
  expect_usage_error({"frobnicate"}, "unknown command 'frobnicate' (run `turbokv --help`");
  // A near miss names the command meant.
  expect_usage_error({"runn"}, "unknown command 'runn' (did you mean run?");
  expect_usage_error({"benhc"}, "(did you mean bench?");
}

TEST(CliErrors, UnknownFlagSuggestsTheCloseOne) {
  expect_usage_error({"run", "-m", "x.gguf", "-p", "hi", "--tmp", "0"},
                     "unknown flag '--tmp' (did you mean --temp?");
  expect_usage_error({"tokenize", "--bogus"}, "unknown flag '--bogus'");
}

TEST(CliErrors, MissingValue) {
  expect_usage_error({"run", "-p", "hi", "-m"}, "flag -m needs a value");
  // The next argument is another flag: still a missing value, not a path "-n".
  expect_usage_error({"run", "-m", "-n", "5"}, "flag -m needs a value");
  expect_usage_error({"synth", "--like"}, "flag --like needs a value");
}

TEST(CliErrors, ServeKvDiskTierNeedsABudget) {
  // Checked before the model is mapped.
  expect_usage_error({"serve", "-m", "x.gguf", "--kv-budget", "0", "--kv-spill-dir", "/tmp"},
                     "--kv-budget: must be larger than 0");
}

TEST(CliErrors, ServePrefixReuseIsExactOrAny) {
  expect_usage_error({"serve", "-m", "x.gguf", "--prefix-reuse", "some"},
                     "--prefix-reuse: expected exact or any, got 'some'");
}

TEST(CliErrors, NonNumericAndOutOfRangeNumbers) {
  expect_usage_error({"run", "-m", "x.gguf", "-p", "hi", "-n", "ten"},
                     "-n: 'ten' is not an integer");
  expect_usage_error({"run", "-m", "x.gguf", "-p", "hi", "-t", "2x"}, "-t: '2x' is not an integer");
  expect_usage_error({"run", "-m", "x.gguf", "-p", "hi", "-t", "0"}, "-t: 0 is out of range");
  expect_usage_error({"run", "-m", "x.gguf", "-p", "hi", "--temp", "hot"},
                     "--temp: 'hot' is not a number");
  expect_usage_error({"run", "-m", "x.gguf", "-p", "hi", "--top-p", "nan"}, "--top-p");
  expect_usage_error({"run", "-m", "x.gguf", "-p", "hi", "--seed", "-1"},
                     "--seed: '-1' is not a non-negative integer");
  expect_usage_error({"run", "-m", "x.gguf", "-p", "hi", "-c", "99999999999999999999"},
                     "out of range");
  expect_usage_error({"run", "-m", "x.gguf", "-p", "hi", "--kv-budget", "lots"}, "--kv-budget");
}

TEST(CliErrors, UnknownCodec) {
  // Rejected before the model is even opened.
  expect_usage_error({"run", "-m", "x.gguf", "-p", "hi", "-ctk", "q3_9"},
                     "-ctk: unknown KV codec 'q3_9'");
  expect_usage_error({"run", "-m", "x.gguf", "-p", "hi", "-ctv", "tq7"},
                     "-ctv: unknown KV codec 'tq7'");
  expect_usage_error({"run", "-m", "x.gguf", "-p", "hi", "--kv", "k5v9"}, "--kv: unknown KV spec");
  expect_usage_error({"run", "-m", "x.gguf", "-p", "hi", "--kv-layer-override", "0:zz"},
                     "--kv-layer-override");
}

TEST(CliErrors, PromptFlagsMustBeExactlyOne) {
  expect_usage_error({"run", "-m", "x.gguf"}, "give exactly one of -p PROMPT or -f PROMPT_FILE");
  expect_usage_error({"run", "-m", "x.gguf", "-p", "a", "-f", "b.txt"}, "give exactly one");
}

TEST(CliErrors, MissingModelFile) {
  const std::string missing = temp_dir() + "/no-such-model.gguf";
  expect_usage_error({"run", "-m", missing, "-p", "hi"}, missing + ": model file does not exist");
  expect_usage_error({"chat", "-m", missing}, "does not exist");
  expect_usage_error({"inspect", missing}, missing);
  expect_usage_error({"run", "-p", "hi"}, "no model given");
  expect_usage_error({"run", "-m", temp_dir(), "-p", "hi"}, "is a directory");
}

TEST(CliErrors, TruncatedAndCorruptModels) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string dir = temp_dir();
  std::ifstream in(model, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 4096u);
  // Cut inside the tensor data, inside the metadata, and just after the magic.
  for (size_t keep : {bytes.size() / 2, size_t(2000), size_t(6)}) {
    const std::string path = dir + "/truncated-" + std::to_string(keep) + ".gguf";
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(keep));
    expect_usage_error({"run", "-m", path, "-p", "hi", "-n", "4"}, path);
    expect_usage_error({"inspect", path}, path);
  }
  // Not a GGUF at all.
  const std::string text = dir + "/notes.gguf";
  std::ofstream(text) << "this is not a model\n";
  expect_usage_error({"run", "-m", text, "-p", "hi"}, text);
  expect_usage_error({"tokenize", "-m", text, "-p", "hi"}, text);
}

TEST(CliErrors, UnreadablePromptFile) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string missing = temp_dir() + "/prompt.txt";
  expect_usage_error({"run", "-m", model, "-f", missing}, missing);
  expect_usage_error({"tokenize", "-m", model, "-f", missing}, missing);
}

TEST(CliErrors, PromptLongerThanTheContext) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  expect_usage_error({"run", "-m", model, "-p", "Once upon a time there was a cat", "-c", "4"},
                     "longer than the context of 4 tokens");
}

TEST(CliErrors, BadKvSettingsNeedingTheModel) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  expect_usage_error({"run", "-m", model, "-p", "hi", "--kv-layer-override", "7:k4v4"},
                     "layer 7 does not exist");
  expect_usage_error({"run", "-m", model, "-p", "hi", "--kv-page", "24"}, "multiple of 16");
}

TEST(CliErrors, UnknownSynthPresetAndType) {
  const std::string out = temp_dir() + "/x.gguf";
  expect_usage_error({"synth", "--like", "gpt-9", "--out", out}, "gpt-9");
  expect_usage_error({"synth", "--like", "tiny", "--out", out, "--type", "q9_Z"}, "q9_Z");
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(CliHelp, EveryCommandHasHelpAndExits0) {
  const CliResult top = run_cli({"--help"});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  // Command names are the first word of the indented lines under "commands:".
  std::vector<std::string> names;
  const size_t list = top.out.find("commands:\n");
  ASSERT_NE(list, std::string::npos) << top.out;
  size_t pos = list + 10;
  while (pos < top.out.size() && top.out.compare(pos, 2, "  ") == 0) {
    const size_t end = top.out.find(' ', pos + 2);
    names.push_back(top.out.substr(pos + 2, end - pos - 2));
    pos = top.out.find('\n', pos) + 1;
  }
  for (const char* expected : {"chat", "inspect", "run", "synth", "tokenize"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    const CliResult r = run_cli({name, "--help"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string first_line = r.out.substr(0, r.out.find('\n'));
    for (char& c : first_line) c = char(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_EQ(first_line.rfind("usage: turbokv " + name, 0), 0u) << r.out;
    const CliResult via_help = run_cli({"help", name});
    EXPECT_EQ(via_help.exit_code, 0);
    EXPECT_EQ(via_help.out, r.out);
  }
}

TEST(CliHelp, RunHelpListsTheSharedFlags) {
  const CliResult r = run_cli({"run", "--help"});
  ASSERT_EQ(r.exit_code, 0);
  for (const char* flag : {"-m, --model",
                           "-t, --threads",
                           "-c, --ctx-size",
                           "-ub, --ubatch",
                           "-ctk, --cache-type-k",
                           "-ctv, --cache-type-v",
                           "--kv SPEC",
                           "--kv-sinks",
                           "--kv-residual",
                           "--kv-window",
                           "--kv-layer-override",
                           "--kv-page",
                           "--kv-budget",
                           "--kv-seed",
                           "--temp",
                           "--top-k",
                           "--top-p",
                           "--min-p",
                           "--repeat-penalty",
                           "--repeat-last-n",
                           "-s, --seed",
                           "--prompt-cache",
                           "--ignore-eos",
                           "--no-bos",
                           "--verbose"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace tkv::test
