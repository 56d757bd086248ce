// llama.cpp's tokenizer test vectors: every text of every shared vocabulary
// must tokenize to exactly the reference ids (add_special = false,
// parse_special = false).
#include <gtest/gtest.h>

#include <iostream>

#include "fixtures.h"

namespace tkv::tok::test {
namespace {

class VocabVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectors, ReproducesEveryReferenceTokenization) {
  const std::string base = "vocab/ggml-vocab-" + GetParam() + ".gguf";
  TKV_REQUIRE_FIXTURE(inp, base + ".inp");
  TKV_REQUIRE_FIXTURE(out, base + ".out");
  TKV_REQUIRE_TOKENIZER(tok, base);
  const std::vector<VectorCase> cases = read_vectors(inp, out);
  ASSERT_GT(cases.size(), 0u);
  size_t passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> ids = tok->encode(cases[i].text, false, false);
    if (ids == cases[i].ids) {
      ++passed;
    } else {
      ADD_FAILURE() << GetParam() << " case " << i << " text '" << cases[i].text
                    << "'\n  expected: " << ids_to_string(cases[i].ids)
                    << "\n  got:      " << ids_to_string(ids);
    }
  }
  std::cout << "[ vectors  ] " << GetParam() << ": " << passed << "/" << cases.size()
            << " texts match\n";
  RecordProperty("passed", int(passed));
  RecordProperty("total", int(cases.size()));
  EXPECT_EQ(passed, cases.size());
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, VocabVectors, ::testing::ValuesIn(vocab_names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace tkv::tok::test
