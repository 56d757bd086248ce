// tokenize, inspect and synth through the binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "test_util.h"

namespace tkv::test {
namespace {

TEST(CliTokenize, IdsMatchTheReferenceContinuation) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  // The reference greedy text starts "Once upon a time," = ids 403 407 261 378 432 after BOS.
  const CliResult r = run_cli({"tokenize", "-m", model, "-p", "Once upon a time,", "--ids"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "403 407 261 378 432\n");
  const CliResult bos =
      run_cli({"tokenize", "-m", model, "-p", "Once upon a time,", "--ids", "--add-bos"});
  EXPECT_EQ(bos.out, "1 403 407 261 378 432\n");
}

TEST(CliTokenize, PiecesOnePerLineAndFromFile) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string file = temp_dir() + "/text.txt";
  std::ofstream(file) << "Once upon\n";
  const CliResult r = run_cli({"tokenize", "-m", model, "-f", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // " Once", " upon", then the newline as a byte token (escaped).
  EXPECT_NE(r.out.find("   403 -> ' Once'\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("   407 -> ' upon'\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> '\\n'\n"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);
}

TEST(CliTokenize, WorksOnVocabularyOnlyFiles) {
  TKV_REQUIRE_FIXTURE(vocab, "vocab/ggml-vocab-llama-bpe.gguf");
  const CliResult r =
      run_cli({"tokenize", "-m", vocab, "-p", "<|eot_id|>Hello", "--ids", "--parse-special"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "128009 9906\n");
  const CliResult plain = run_cli({"tokenize", "-m", vocab, "-p", "<|eot_id|>Hello", "--ids"});
  EXPECT_NE(plain.out.rfind("128009", 0), 0u) << plain.out;  // parsed as text, not the token
}

TEST(CliInspect, ListsMetadataTensorsAndTheModelSummary) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const CliResult r = run_cli({"inspect", model});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("token_embd.weight"), std::string::npos);
  EXPECT_NE(r.out.find("llama.embedding_length"), std::string::npos);
  EXPECT_NE(r.out.find("model:\n"), std::string::npos);
  EXPECT_NE(r.out.find("layers 5, embedding 64, heads 8 (KV 4, head dim 8)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("attn_q.weight"), std::string::npos);
  // f16: 2 bytes x 8 dims x (K + V) x 4 KV heads x 5 layers = 640 bytes per token.
  EXPECT_NE(r.out.find("f16          640 bytes/token"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("k4v2"), std::string::npos);
}

// The KV figures count each layer with K/V of its own at its geometry:
// tiny-gemma4-e keeps K/V in layers 0-2 (1 head x 32) and 3 (1 x 64), and
// layers 4-7 read theirs. f16: 2 bytes x (3 x 64 + 128) = 640 per token.
TEST(CliInspect, KvFiguresCountTheLayersThatKeepKv) {
  const std::string path = temp_dir() + "/tiny-gemma4-e.gguf";
  ASSERT_EQ(run_cli({"synth", "--like", "tiny-gemma4-e", "--out", path}).exit_code, 0);
  const CliResult r = run_cli({"inspect", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("the 4 of 8 layers with K/V of their own"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("f16          640 bytes/token"), std::string::npos) << r.out;
}

// -m names the file as in every other command; two different files, or
// none, are an error.
TEST(CliInspect, TakesTheModelWithMToo) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const CliResult positional = run_cli({"inspect", model});
  const CliResult flag = run_cli({"inspect", "-m", model});
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  EXPECT_EQ(flag.out, positional.out);
  EXPECT_EQ(run_cli({"inspect", model, "--model", model}).out, positional.out);
  const CliResult two = run_cli({"inspect", model, "-m", "other.gguf"});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_NE(two.err.find("two files given"), std::string::npos) << two.err;
  const CliResult none = run_cli({"inspect"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no file given"), std::string::npos) << none.err;
}

TEST(CliInspect, AllShowsLongArraysInFull) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const CliResult brief = run_cli({"inspect", model});
  const CliResult all = run_cli({"inspect", model, "--all"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_GT(all.out.size(), brief.out.size() + 1000);
}

TEST(CliInspect, VocabularyFileHasNoModelSection) {
  TKV_REQUIRE_FIXTURE(vocab, "vocab/ggml-vocab-llama-spm.gguf");
  const CliResult r = run_cli({"inspect", vocab});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tokenizer.ggml.model"), std::string::npos);
  EXPECT_NE(r.out.find("model: none ("), std::string::npos) << r.out;
}

TEST(CliSynth, ListsPresets) {
  const CliResult r = run_cli({"synth", "--list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* preset : {"tiny", "llama-3.2-1b", "llama-3.1-8b", "qwen2.5-7b", "mistral-7b"})
    EXPECT_NE(r.out.find(preset), std::string::npos) << preset;
}

TEST(CliSynth, TinyModelRunsAndInspects) {
  const std::string path = temp_dir() + "/tiny.gguf";
  const CliResult synth =
      run_cli({"synth", "--like", "tiny", "--out", path, "--type", "q8_0", "-t", "2"});
  ASSERT_EQ(synth.exit_code, 0) << synth.err;
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_NE(synth.err.find("synth: 100%"), std::string::npos) << synth.err;
  EXPECT_NE(synth.err.find("MB written"), std::string::npos);
  EXPECT_NE(synth.err.find("synth: wrote " + path), std::string::npos);

  const CliResult run =
      run_cli({"run", "-m", path, "-p", "hello world", "-n", "8", "--temp", "0", "--ignore-eos"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(summary_field(run.err, "generated"), "8 (length)");
  // Same seed, same bytes: a second synth gives the same greedy text.
  const std::string again = temp_dir() + "/tiny2.gguf";
  ASSERT_EQ(run_cli({"synth", "--like", "tiny", "--out", again, "--type", "q8_0"}).exit_code, 0);
  EXPECT_EQ(
      run_cli({"run", "-m", again, "-p", "hello world", "-n", "8", "--temp", "0", "--ignore-eos"})
          .out,
      run.out);

  const CliResult inspect = run_cli({"inspect", path, "--model-only"});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_EQ(inspect.out.rfind("model:\n", 0), 0u) << inspect.out;
  EXPECT_NE(inspect.out.find("q8_0"), std::string::npos);
}

TEST(CliSynth, LayersAndVocabularyFrom) {
  TKV_REQUIRE_FIXTURE(vocab, "vocab/ggml-vocab-llama-spm.gguf");
  const std::string path = temp_dir() + "/tiny-spm.gguf";
  const CliResult r =
      run_cli({"synth", "--like", "tiny", "--out", path, "--layers", "1", "--vocab-from", vocab});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 layers, vocabulary 32000"), std::string::npos) << r.err;
  const CliResult tok = run_cli({"tokenize", "-m", path, "-p", "Hello", "--ids"});
  const CliResult ref = run_cli({"tokenize", "-m", vocab, "-p", "Hello", "--ids"});
  EXPECT_EQ(tok.out, ref.out);
}

}  // namespace
}  // namespace tkv::test
