// Shared helpers for the tokenizer tests: loading the shared vocabularies
// once per process, and reading llama.cpp's tokenizer test vectors.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "tokenizer/tokenizer.h"

namespace tkv::tok::test {

// The vocabularies llama.cpp ships test vectors for (ggml-vocab-X.gguf).
inline const std::vector<std::string>& vocab_names() {
  static const std::vector<std::string> names = {
      "llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2", "deepseek-llm", "gemma-4", "qwen35"};
  return names;
}

// Loads (once) the tokenizer of a fixture path relative to the models dir,
// e.g. "vocab/ggml-vocab-qwen2.gguf"; nullptr when the fixture is absent.
const Tokenizer* load_fixture_tokenizer(const std::string& relative);

struct VectorCase {
  std::string text;
  std::vector<int32_t> ids;
};
// X.gguf.inp: texts each followed by "\n__ggml_vocab_test__\n" (the last
// one may lack it); X.gguf.out: one line of ids per text. Throws
// std::runtime_error when the counts differ.
std::vector<VectorCase> read_vectors(const std::string& inp_path, const std::string& out_path);

std::string ids_to_string(const std::vector<int32_t>& ids);

}  // namespace tkv::tok::test

// Skips (or under TURBOKV_REQUIRE_FIXTURES=1 fails) the test, printing why, when the vocabulary
// fixture is absent.
#define TKV_REQUIRE_TOKENIZER(var, relative)                                             \
  const ::tkv::tok::Tokenizer* var = ::tkv::tok::test::load_fixture_tokenizer(relative); \
  if (!var) {                                                                            \
    TKV_MISSING_FIXTURE << "fixture " << (relative) << " not found under "               \
                        << ::tkv::test::models_dir() << " (set TURBOKV_MODELS)";         \
  }
