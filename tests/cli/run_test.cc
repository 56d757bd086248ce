// `turbokv run` end to end on the real stories260K model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.h"
#include "test_util.h"

namespace tkv::test {
namespace {

// The reference greedy continuation from BOS (llama2.c semantics: the text
// of the 255 generated tokens, the first one losing its leading space).
std::string reference_text() {
  const std::string path = model_path("reference/stories260K.greedy256.json");
  if (path.empty()) return {};
  std::ifstream in(path);
  return nlohmann::json::parse(in).at("text").get<std::string>();
}

std::vector<std::string> greedy_from_bos(const std::string& model, int n) {
  // The model's trained context is 128 tokens; the reference runs to 256,
  // with an f16 cache (a later --kv replaces it).
  return {"run", "-m", model, "-p",  "",     "--temp", "0", "-n", std::to_string(n),
          "-t",  "1",  "-c",  "256", "--kv", "f16"};
}

TEST(CliRun, GreedyFromBosReproducesTheReferenceText) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string expected = reference_text();
  ASSERT_FALSE(expected.empty());
  // All 256 generated tokens of the reference: the output is exactly its text.
  const CliResult r = run_cli(greedy_from_bos(model, 256));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected + "\n");
  EXPECT_EQ(summary_field(r.err, "prompt"), "1 tok (0 cached)");
  EXPECT_EQ(summary_field(r.err, "generated"), "256 (length)");
  // 255 of them were fed back through the model (the last one needs no eval).
  EXPECT_EQ(summary_field(r.err, "decode").rfind("255 tok in ", 0), 0u) << r.err;
}

TEST(CliRun, SummaryLineReportsSpeedAndMemory) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const CliResult r = run_cli({"run", "-m", model, "-p", "Once upon a time", "--temp", "0", "-n",
                               "16", "-t", "2", "--seed", "7", "--kv", "f16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The prompt is echoed, then the continuation.
  EXPECT_EQ(r.out.rfind("Once upon a time", 0), 0u) << r.out;
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << r.err;  // only the summary
  EXPECT_EQ(summary_field(r.err, "prompt"), "5 tok (0 cached)");
  EXPECT_NE(summary_field(r.err, "prefill").find("tok/s"), std::string::npos);
  EXPECT_FALSE(summary_field(r.err, "TTFT").empty());
  EXPECT_NE(summary_field(r.err, "decode").find("15 tok in"), std::string::npos);
  EXPECT_NE(summary_field(r.err, "peak RSS").find("iB"), std::string::npos);
  EXPECT_EQ(summary_field(r.err, "model"), "1.12 MiB");
  EXPECT_NE(summary_field(r.err, "KV").find("persistent"), std::string::npos);
  EXPECT_NE(summary_field(r.err, "KV").find("peak scratch, 20 tokens"), std::string::npos);
  EXPECT_EQ(summary_field(r.err, "kv").rfind("k=f16 v=f16", 0), 0u);
  EXPECT_EQ(summary_field(r.err, "sampling"), "greedy");
  EXPECT_EQ(summary_field(r.err, "threads"), "2");
}

// "44.05 MiB" -> bytes (format_bytes' units; two decimals, so a part is
// within half a unit of its hundredth).
double parse_size(const std::string& text) {
  std::istringstream in(text);
  double v = 0;
  std::string unit;
  in >> v >> unit;
  const std::vector<std::string> units = {"B", "KiB", "MiB", "GiB"};
  for (size_t u = 0; u < units.size(); ++u)
    if (unit == units[u]) return v * double(uint64_t(1) << (10 * u));
  ADD_FAILURE() << "not a size: " << text;
  return 0;
}

// The memory part names what holds the peak resident memory; the parts and
// the unexplained rest add up to the peak, and the rest is small: every MiB
// past the model file and the KV cache has a name.
TEST(CliRun, SummaryAccountsForPeakMemory) {
#ifndef __linux__
  GTEST_SKIP() << "the OS figures come from /proc/self/smaps";
#endif
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const CliResult r =
      run_cli({"run", "-m", model, "-p", "Once upon a time", "--temp", "0", "-n", "16", "-t", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string memory = summary_field(r.err, "memory");
  ASSERT_EQ(memory.rfind("peak ", 0), 0u) << r.err;
  const size_t eq = memory.find(" = ");
  ASSERT_NE(eq, std::string::npos) << memory;
  const double peak = parse_size(memory.substr(5, eq - 5));
  EXPECT_EQ(peak, parse_size(summary_field(r.err, "peak RSS")));
  const std::vector<std::string> names = {"model file",
                                          "KV",
                                          "KV scratch",
                                          "activations",
                                          "product scratch",
                                          "tokenizer",
                                          "code and libraries",
                                          "thread stacks",
                                          "other"};
  std::map<std::string, double> part;
  size_t at = eq + 3;
  for (const std::string& name : names) {
    ASSERT_EQ(memory.compare(at, name.size() + 1, name + " "), 0) << name << " in " << memory;
    at += name.size() + 1;
    size_t end = memory.find(" + ", at);
    if (end == std::string::npos) end = memory.size();
    const std::string value = memory.substr(at, end - at);
    part[name] = value[0] == '-' ? -parse_size(value.substr(1)) : parse_size(value);
    at = end + 3;
  }
  double sum = 0;
  for (const auto& [name, bytes] : part) sum += bytes;
  // Nine figures rounded to a hundredth of their unit (MiB at most here).
  EXPECT_NEAR(sum, peak, 9 * 0.005 * 1048576 + 1) << memory;
  // The parts the engine and the OS name hold everything past the model and
  // the KV cache but at most 4 MiB (malloc's own, the prompt, what was freed).
  EXPECT_LE(std::abs(part["other"]), 4.0 * 1048576) << memory;
  for (const char* named : {"model file", "KV", "activations", "tokenizer", "code and libraries"})
    EXPECT_GT(part[named], 0) << named << " in " << memory;
}

TEST(CliRun, F32CacheGivesTheSameGreedyTextAsF16) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  auto args = greedy_from_bos(model, 120);
  const CliResult f16 = run_cli(args);
  args.insert(args.end(), {"-ctk", "f32", "-ctv", "f32"});
  const CliResult f32 = run_cli(args);
  ASSERT_EQ(f16.exit_code, 0) << f16.err;
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  EXPECT_EQ(f32.out, f16.out);
  EXPECT_NE(f32.err.find("k=f32 v=f32"), std::string::npos) << f32.err;
}

// --mmap maps the file, --no-mmap reads it into huge pages: the same text,
// and --verbose says which; both at once is a one-line error.
TEST(CliRun, MappedAndCopiedWeightsGiveTheSameText) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  auto args = greedy_from_bos(model, 60);
  args.push_back("--verbose");
  auto with = [&](const char* flag) {
    auto a = args;
    a.push_back(flag);
    return run_cli(a);
  };
  const CliResult mapped = with("--mmap"), copied = with("--no-mmap");
  ASSERT_EQ(mapped.exit_code, 0) << mapped.err;
  ASSERT_EQ(copied.exit_code, 0) << copied.err;
  EXPECT_EQ(copied.out, mapped.out);
  EXPECT_NE(mapped.err.find("(weights mapped)"), std::string::npos) << mapped.err;
  EXPECT_NE(copied.err.find("(weights read into 2 MiB pages)"), std::string::npos) << copied.err;
  auto both = args;
  both.insert(both.end(), {"--mmap", "--no-mmap"});
  const CliResult r = run_cli(both);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "turbokv: error: run: --mmap and --no-mmap contradict each other; give one\n");
}

TEST(CliRun, QuantizedCachesRun) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string reference = reference_text();
  for (const char* kv : {"k4v4", "k4v2", "k8v8", "q4_0h"}) {
    SCOPED_TRACE(kv);
    auto args = greedy_from_bos(model, 100);
    args.insert(args.end(), {"--kv", kv});
    const CliResult r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(summary_field(r.err, "generated"), "100 (length)");
    // Default policy: 4 f16 sinks + the newest 64 tokens in f16.
    EXPECT_NE(r.err.find("sinks=4 residual=64"), std::string::npos) << r.err;
    // The first 64 tokens see only f16 keys and values: same text as the reference.
    EXPECT_EQ(r.out.substr(0, 120), reference.substr(0, 120));
  }
  // High bits: the whole greedy text equals f16's.
  auto args = greedy_from_bos(model, 200);
  const CliResult f16 = run_cli(args);
  args.insert(args.end(), {"--kv", "k8v8", "--kv-residual", "0", "--kv-sinks", "0"});
  const CliResult k8 = run_cli(args);
  ASSERT_EQ(k8.exit_code, 0) << k8.err;
  EXPECT_EQ(k8.out, f16.out);
}

// The cache holds the prompt up to its last -ub boundary before its last
// token; a run that restores it gives, bit for bit, the output of a run
// without it (with a k4v2 cache, whose residual window is part of that
// state).
TEST(CliRun, PromptCacheSkipsPrefillAndGivesIdenticalOutput) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string cache = temp_dir() + "/prompt.session";
  const std::string prompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park. One day, she saw a big, red ball.";
  const std::vector<std::string> args = {"run",  "-m",
                                         model,  "-p",
                                         prompt, "--temp",
                                         "0",    "-n",
                                         "24",   "-t",
                                         "1",    "-ub",
                                         "8",    "--kv",
                                         "k4v2", "--kv-residual",
                                         "16",   "--prompt-cache",
                                         cache};
  auto without_cache = [](std::vector<std::string> a) {
    a.resize(a.size() - 2);
    return run_cli(a);
  };
  const CliResult first = run_cli(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_TRUE(std::filesystem::exists(cache));
  EXPECT_FALSE(std::filesystem::exists(cache + ".json")) << "one session file, no sidecar";
  const std::string prompt_field = summary_field(first.err, "prompt");
  const int n_prompt = std::stoi(prompt_field);
  ASSERT_GT(n_prompt, 20);
  const int point = (n_prompt - 1) / 8 * 8;
  EXPECT_EQ(prompt_field, std::to_string(n_prompt) + " tok (0 cached)");
  EXPECT_EQ(summary_field(first.err, "prefill").rfind(std::to_string(n_prompt) + " tok in", 0), 0u);
  EXPECT_EQ(without_cache(args).out, first.out);

  const CliResult second = run_cli(args);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
  EXPECT_EQ(summary_field(second.err, "prompt"),
            std::to_string(n_prompt) + " tok (" + std::to_string(point) + " cached)");
  // Only the last -ub chunk is evaluated again.
  EXPECT_EQ(
      summary_field(second.err, "prefill").rfind(std::to_string(n_prompt - point) + " tok in", 0),
      0u)
      << second.err;

  // A longer prompt that starts with the cached one reuses the prefix.
  auto longer = args;
  longer[4] = prompt + " She wanted to play with it.";
  const CliResult third = run_cli(longer);
  ASSERT_EQ(third.exit_code, 0) << third.err;
  const std::string reused = std::to_string(point) + " cached)";
  EXPECT_NE(summary_field(third.err, "prompt").find(reused), std::string::npos) << third.err;
  EXPECT_EQ(without_cache(longer).out, third.out);

  // Other KV settings or another -ub: the file is not used (one note), the
  // output is still right.
  for (const std::vector<std::string>& more :
       {std::vector<std::string>{"-ctk", "f32"}, std::vector<std::string>{"-ub", "16"}}) {
    auto other = args;
    other.insert(other.end() - 2, more.begin(), more.end());
    const CliResult r = run_cli(other);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("prompt cache " + cache + " not used"), std::string::npos) << r.err;
    EXPECT_EQ(summary_field(r.err, "prompt"), std::to_string(n_prompt) + " tok (0 cached)");
    EXPECT_EQ(r.out, without_cache(other).out);
  }
}

TEST(CliRun, StopsAtTheContextEndWithAClearMessage) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const CliResult r =
      run_cli({"run", "-m", model, "-p", "Once upon a time", "--temp", "0", "-c", "32", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("context full (32 tokens)"), std::string::npos) << r.err;
  EXPECT_EQ(summary_field(r.err, "generated"), "28 (context full)");
  // A window policy keeps going past the context (f16: no residual window
  // that the 16 tokens would have to exceed).
  const CliResult window =
      run_cli({"run", "-m", model, "-p", "Once upon a time", "--temp", "0", "-c", "32", "-n", "60",
               "--kv", "f16", "--kv-window", "16", "-t", "1"});
  ASSERT_EQ(window.exit_code, 0) << window.err;
  EXPECT_EQ(summary_field(window.err, "generated"), "60 (length)");
}

TEST(CliRun, SampledRunsAreReproducibleFromTheSeed) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::vector<std::string> base = {"run", "-m", model, "-p", "Once", "-n", "40", "-t", "1"};
  const CliResult unseeded = run_cli(base);
  ASSERT_EQ(unseeded.exit_code, 0) << unseeded.err;
  // The random seed is printed so the run can be repeated.
  const std::string sampling = summary_field(unseeded.err, "sampling");
  const size_t at = sampling.find(" seed ");
  ASSERT_NE(at, std::string::npos) << sampling;
  auto again = base;
  again.insert(again.end(), {"--seed", sampling.substr(at + 6)});
  EXPECT_EQ(run_cli(again).out, unseeded.out);
}

TEST(CliRun, ReadsThePromptFromAFile) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string file = temp_dir() + "/prompt.txt";
  std::ofstream(file) << "Lily and Ben";
  const CliResult from_file = run_cli({"run", "-m", model, "-f", file, "--temp", "0", "-n", "12"});
  const CliResult inline_p =
      run_cli({"run", "-m", model, "-p", "Lily and Ben", "--temp", "0", "-n", "12"});
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_EQ(from_file.out, inline_p.out);
  EXPECT_EQ(from_file.out.rfind("Lily and Ben", 0), 0u);
}

}  // namespace
}  // namespace tkv::test
