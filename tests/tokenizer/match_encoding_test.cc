// Tokenizer::match_encoding against its definition (encode the text, compare
// with the ids) on every shared vocabulary: chat-like texts of special
// tokens, words, spaces and random UTF-8, each set beside its prefixes and
// beside variants that part from it (a changed last message, a cut inside a
// special token's text, whitespace before a stripping special token).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "fixtures.h"
#include "random_text.h"

namespace tkv::tok::test {
namespace {

// What match_encoding must give: encode text, then compare.
Tokenizer::EncodingMatch by_definition(const Tokenizer& tok, const std::vector<int32_t>& ids,
                                       const std::string& text, bool parse_special) {
  const std::vector<int32_t> enc = tok.encode(text, false, parse_special);
  const auto end = std::mismatch(enc.begin(), enc.end(), ids.begin(), ids.end());
  return {size_t(end.first - enc.begin()), end.first == enc.end()};
}

// The vocabulary's special tokens among those chat templates write.
std::vector<std::string> markers(const Tokenizer& tok) {
  std::vector<std::string> out;
  for (const char* m :
       {"<|im_start|>", "<|im_end|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
        "<start_of_turn>", "<end_of_turn>", "<|user|>", "<|assistant|>", "<|end|>", "<s>", "</s>",
        "<|turn>", "<turn|>", "<|endoftext|>"})
    if (tok.find_token(m) != kNoToken) out.push_back(m);
  return out;
}

// A conversation-shaped text of about `parts` pieces.
std::string chat_text(std::mt19937& rng, const std::vector<std::string>& marks, int parts) {
  static const char* kWords[] = {"user", "assistant", "\n",     "\n\n", " ",
                                 "  ",   "Hello",     " world", "tool", "{\"a\": 1}",
                                 "  \t", "é",         "日本語", "1234", "!"};
  std::string t;
  for (int i = 0; i < parts; ++i) {
    const int kind = int(rng() % 8);
    if (kind < 2 && !marks.empty())
      t += marks[rng() % marks.size()];
    else if (kind == 2)
      t += random_utf8(rng, 6);
    else
      t += kWords[rng() % std::size(kWords)];
  }
  return t;
}

TEST(MatchEncoding, EqualsEncodingAndComparingOnEveryVocabulary) {
  int vocabs = 0, checks = 0;
  for (const std::string& name : vocab_names()) {
    const Tokenizer* tok = load_fixture_tokenizer("vocab/ggml-vocab-" + name + ".gguf");
    if (!tok) continue;
    ++vocabs;
    const std::vector<std::string> marks = markers(*tok);
    std::mt19937 rng(7 + uint32_t(vocabs));
    for (int round = 0; round < 40; ++round) {
      const std::string full = chat_text(rng, marks, 6 + round);
      for (const bool parse_special : {true, false}) {
        const std::vector<int32_t> ids = tok->encode(full, false, parse_special);
        std::vector<std::string> texts = {full, "", full + "x"};
        for (int c = 0; c < 6; ++c) {
          const std::string head = full.substr(0, rng() % (full.size() + 1));
          texts.push_back(head);
          texts.push_back(head + chat_text(rng, marks, 3));
          texts.push_back(head + " \n");
        }
        for (const std::string& m : marks)
          texts.push_back(full + m), texts.push_back(full + " " + m);
        for (const std::string& text : texts) {
          const Tokenizer::EncodingMatch want = by_definition(*tok, ids, text, parse_special);
          const Tokenizer::EncodingMatch got = tok->match_encoding(ids, text, parse_special);
          ASSERT_EQ(got.common, want.common) << name << (parse_special ? "" : " (plain)") << ": \""
                                             << text << "\" beside \"" << full << "\"";
          ASSERT_EQ(got.whole, want.whole) << name << ": \"" << text << "\"";
          ++checks;
        }
      }
    }
  }
  if (vocabs == 0)
    TKV_MISSING_FIXTURE << "no vocabulary fixtures under " << ::tkv::test::models_dir();
  EXPECT_GT(checks, 1000);
}

// Where ids spell a shared start whose fragments are skipped, the answer
// still notices a difference in the fragment that ends the text.
TEST(MatchEncoding, ALastFragmentThatTokenizesOtherwiseIsSeen) {
  TKV_REQUIRE_TOKENIZER(tok, "vocab/ggml-vocab-qwen2.gguf");
  const std::string start = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello";
  const std::vector<int32_t> ids = tok->encode(start + " world<|im_end|>", false, true);
  // "Hello" alone against "Hello world": BPE may part at "Hello"; either
  // way the answer is the definition's, and the shared start is counted.
  const Tokenizer::EncodingMatch m = tok->match_encoding(ids, start, true);
  EXPECT_EQ(m.common, by_definition(*tok, ids, start, true).common);
  EXPECT_GE(m.common,
            tok->encode("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n", false, true)
                .size());
  // A changed word in the middle: the common part ends inside that fragment.
  const std::string other = "<|im_start|>system\nBe long.<|im_end|>\n<|im_start|>user\nHello";
  const Tokenizer::EncodingMatch o = tok->match_encoding(ids, other, true);
  EXPECT_FALSE(o.whole);
  EXPECT_EQ(o.common, by_definition(*tok, ids, other, true).common);
  EXPECT_LT(o.common, m.common);
}

}  // namespace
}  // namespace tkv::tok::test
