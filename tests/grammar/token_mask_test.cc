#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/test_util.h"
#include "gguf/gguf.h"
#include "grammar/token_mask.h"
#include "grammar_test_util.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

namespace tkv::grammar {
namespace {

using test::schema;

bool bit(const std::vector<uint64_t>& bits, size_t t) {
  return bits[t >> 6] >> (t & 63) & 1;
}

// A small vocabulary: every byte, some words and JSON pieces, two control
// tokens (empty bytes) and, last, the end token.
std::vector<std::string> small_vocab() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.emplace_back(1, char(b));
  for (const char* w : {"{\"",  "\":",         "\",",   "\"}",           "name",
                        "na",   "nam",         "age",   " \"",           "\":\"",
                        "12",   "true",        "tr",    "\n  ",          "\xC3\xA9",
                        "\xC3", "caf\xC3\xA9", "\"\n}", "\u00e9t\u00e9", "[\"",
                        "\"]",  ", ",          "},{",   "null",          "\"age\":",
                        "}}"})
    v.emplace_back(w);
  v.emplace_back("");  // control
  v.emplace_back("");  // control
  v.emplace_back("");  // the end token
  return v;
}

// The allowed tokens by brute force: each token's bytes through the matcher.
std::vector<bool> brute_force(Matcher& m, Matcher::State s, const std::vector<std::string>& vocab) {
  std::vector<bool> ok(vocab.size());
  for (size_t t = 0; t < vocab.size(); ++t)
    ok[t] = !vocab[t].empty() && m.advance(s, vocab[t]) != Matcher::kDead;
  return ok;
}

constexpr const char* kPerson = R"({"type":"object","properties":{
    "name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"},"maxItems":3}},
    "required":["name","age"]})";
constexpr const char* kDocument =
    "{\"name\": \"caf\xC3\xA9 \\\"x\\\"\", \"age\": 12, \"tags\": [\"a\", \"b\"]}";

TEST(TokenMask, TrieWalkEqualsBruteForce) {
  const std::vector<std::string> vocab = small_vocab();
  const auto trie = std::make_shared<const TokenTrie>(vocab);
  const auto g = schema(kPerson);
  Matcher m(g);
  Matcher::State s = m.start();
  std::vector<uint64_t> bits;
  // At every byte of a valid document.
  for (size_t i = 0; i <= std::string(kDocument).size(); ++i) {
    SCOPED_TRACE(std::string(kDocument).substr(0, i));
    trie->allowed(m, s, bits);
    const std::vector<bool> expected = brute_force(m, s, vocab);
    for (size_t t = 0; t < vocab.size(); ++t) ASSERT_EQ(bit(bits, t), expected[t]) << t;
    if (i < std::string(kDocument).size()) s = m.step(s, uint8_t(kDocument[i]));
    ASSERT_NE(s, Matcher::kDead);
  }
  EXPECT_TRUE(m.accepting(s));
}

TEST(TokenMask, EndTokensOnlyWhereTheGrammarAccepts) {
  const std::vector<std::string> vocab = small_vocab();
  const int32_t end = int32_t(vocab.size() - 1), control = end - 1;
  GrammarConstraint c(test::gbnf(R"(root ::= "ab" "c"?)"), std::make_shared<const TokenTrie>(vocab),
                      {end});
  EXPECT_FALSE(bit(c.allowed(), size_t(end)));
  EXPECT_TRUE(bit(c.allowed(), 'a'));
  c.accept('a');
  c.accept('b');
  EXPECT_TRUE(c.accepting());
  EXPECT_TRUE(bit(c.allowed(), size_t(end)));  // "ab" is complete
  EXPECT_TRUE(bit(c.allowed(), 'c'));          // and "c" may follow
  EXPECT_FALSE(bit(c.allowed(), size_t(control)));
  c.accept('c');
  EXPECT_TRUE(c.complete());
  // Nothing may follow: the end token is all that is left.
  size_t allowed = 0;
  for (size_t t = 0; t < vocab.size(); ++t) allowed += bit(c.allowed(), t);
  EXPECT_EQ(allowed, 1u);
  EXPECT_TRUE(bit(c.allowed(), size_t(end)));
  c.accept(end);  // the end leaves the state as it is
  EXPECT_TRUE(c.complete());
  EXPECT_THROW(c.accept('x'), Error);
}

TEST(TokenMask, MaskSetsForbiddenLogitsToMinusInfinity) {
  const std::vector<std::string> vocab = small_vocab();
  GrammarConstraint c(test::gbnf(R"(root ::= "na" [a-z]*)"),
                      std::make_shared<const TokenTrie>(vocab), {int32_t(vocab.size() - 1)});
  std::vector<float> logits(vocab.size(), 1.0f);
  c.mask(logits.data(), int(logits.size()));
  for (size_t t = 0; t < vocab.size(); ++t) {
    const bool ok = vocab[t] == "n" || vocab[t] == "na" || vocab[t] == "nam" || vocab[t] == "name";
    EXPECT_EQ(std::isinf(logits[t]), !ok) << t;
  }
  EXPECT_THROW(c.mask(logits.data(), 5), Error);  // the wrong vocabulary size
}

TEST(TokenMask, NoTokenCanContinueIsAnError) {
  // A vocabulary without the byte the grammar needs.
  const std::vector<std::string> vocab = {"a", "b", ""};
  GrammarConstraint c(test::gbnf(R"(root ::= "c")"), std::make_shared<const TokenTrie>(vocab), {2});
  std::vector<float> logits(3, 0.0f);
  EXPECT_THROW(c.mask(logits.data(), 3), Error);
}

TEST(TokenMask, SamplerDrawsOnlyAllowedTokensUntilTheEnd) {
  const std::vector<std::string> vocab = small_vocab();
  const int32_t end = int32_t(vocab.size() - 1);
  for (float temperature : {0.0f, 1.0f}) {
    sample::SamplerConfig config;
    config.temperature = temperature;
    config.top_k = 0;
    config.top_p = 1.0f;
    config.min_p = 0.0f;
    config.seed = 7;
    sample::Sampler sampler(config);
    auto c = std::make_shared<GrammarConstraint>(
        schema(kPerson), std::make_shared<const TokenTrie>(vocab), std::vector<int32_t>{end});
    sampler.set_constraint(c);
    // Random logits: the grammar alone keeps the output valid.
    std::string text;
    int32_t t = -1;
    for (int step = 0; step < 2000 && t != end; ++step) {
      const std::vector<float> logits =
          tkv::test::random_vector(int64_t(vocab.size()), uint32_t(step + 1), 3.0f);
      t = sampler.sample(logits.data(), int(logits.size()));
      sampler.accept(t);
      if (t != end) text += vocab[size_t(t)];
    }
    SCOPED_TRACE(text);
    if (t == end) {
      EXPECT_TRUE(matches(schema(kPerson), text));
      EXPECT_TRUE(nlohmann::json::accept(text));
    } else {
      EXPECT_NE(Matcher(schema(kPerson)).advance(0, text), Matcher::kDead);  // a valid prefix
    }
  }
}

TEST(TokenMask, LlamaBpeVocabularyAgreesWithBruteForce) {
  TKV_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-llama-bpe.gguf");
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_gguf(gguf::GgufFile::open(path));
  std::vector<std::string> vocab(size_t(tokenizer.n_vocab()));
  for (int32_t t = 0; t < tokenizer.n_vocab(); ++t) vocab[size_t(t)] = tokenizer.token_to_piece(t);
  const auto trie = std::make_shared<const TokenTrie>(vocab);
  // Strings with and without maxLength: the walk takes whole subtrees
  // there, which brute force checks token by token.
  const struct {
    const char* schema;
    std::vector<const char*> prefixes;
  } cases[] = {
      {kPerson,
       {"", "{", "{\"name\": \"caf", "{\"name\": \"x\", \"age\": 1",
        "{\"name\": \"x\", \"age\": 12, \"tags\": [\"a\""}},
      {R"({"type":"object","properties":{"s":{"type":"string","maxLength":10},"t":{"type":"string"}},
          "required":["s","t"]})",
       {"{\"s\": \"", "{\"s\": \"ab", "{\"s\": \"abcdefghi", "{\"s\": \"x\", \"t\": \"hello w"}},
  };
  std::vector<uint64_t> bits;
  for (const auto& c : cases) {
    Matcher m(schema(c.schema));
    for (const char* prefix : c.prefixes) {
      SCOPED_TRACE(prefix);
      const Matcher::State s = m.advance(m.start(), prefix);
      ASSERT_NE(s, Matcher::kDead);
      trie->allowed(m, s, bits);
      const std::vector<bool> expected = brute_force(m, s, vocab);
      size_t n_allowed = 0;
      for (size_t t = 0; t < vocab.size(); ++t) {
        ASSERT_EQ(bit(bits, t), expected[t]) << t << " " << vocab[t];
        n_allowed += expected[t];
      }
      EXPECT_GT(n_allowed, 0u);
    }
  }
}

}  // namespace
}  // namespace tkv::grammar
