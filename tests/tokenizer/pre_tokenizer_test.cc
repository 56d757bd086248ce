// The regex pre-tokenizers on inputs whose splits are known (from
// llama.cpp's semantics), including the whitespace and invalid-UTF-8 rules
// that differ from a plain PCRE2 run.
#include <gtest/gtest.h>

#include <random>

#include "common/error.h"
#include "random_text.h"
#include "tokenizer/pre_tokenizer.h"

namespace tkv::tok {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(const std::string& pre, const std::string& text) {
  const PreTokenizer p(pre_tokenizer_spec(pre).patterns);
  Pieces out;
  size_t begin = 0;
  for (size_t end : p.split(text)) {
    out.push_back(text.substr(begin, end - begin));
    begin = end;
  }
  return out;
}

TEST(PreTokenizer, WordsAndLeadingSpaces) {
  EXPECT_EQ(split("gpt-2", "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("llama3", "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("gpt-2", "a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(split("gpt-2", "a \n"), (Pieces{"a", " \n"}));
  EXPECT_EQ(split("llama3", "a \n\n b"), (Pieces{"a", " \n\n", " b"}));
}

TEST(PreTokenizer, DigitGrouping) {
  EXPECT_EQ(split("gpt-2", "x 1234567"), (Pieces{"x", " 1234567"}));
  EXPECT_EQ(split("llama3", "1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(split("qwen2", "1234"), (Pieces{"1", "2", "3", "4"}));
  EXPECT_EQ(split("deepseek-llm", "ab 1234"), (Pieces{"ab", " ", "1234"}));
}

TEST(PreTokenizer, Contractions) {
  // GPT-2's are case-sensitive, Llama 3's are not.
  EXPECT_EQ(split("gpt-2", "I'm I'M"), (Pieces{"I", "'m", " I", "'", "M"}));
  EXPECT_EQ(split("llama3", "I'm I'M"), (Pieces{"I", "'m", " I", "'M"}));
  // U+017F (long s) case-folds to "s" but is not a contraction for llama.cpp.
  EXPECT_EQ(split("llama3", "it'\xC5\xBF"), (Pieces{"it", "'\xC5\xBF"}));
}

TEST(PreTokenizer, UnicodeWhitespaceIsWhitespace) {
  // NBSP and the ideographic space count as \s, as in llama.cpp.
  EXPECT_EQ(split("llama3",
                  "a\xC2\xA0\xC2\xA0"
                  "b"),
            (Pieces{"a", "\xC2\xA0",
                    "\xC2\xA0"
                    "b"}));
  // GPT-2's optional space before a word is ASCII only: the ideographic
  // space stays a piece of its own.
  EXPECT_EQ(split("gpt-2",
                  "a\xE3\x80\x80\xE3\x80\x80"
                  "b"),
            (Pieces{"a", "\xE3\x80\x80", "\xE3\x80\x80", "b"}));
  // U+180E (Mongolian vowel separator) is not White_Space: it is a symbol
  // here, although PCRE2's UCP mode would count it as \s.
  EXPECT_EQ(split("llama3", "a\xE1\xA0\x8E b"), (Pieces{"a", "\xE1\xA0\x8E", " b"}));
}

TEST(PreTokenizer, ExplicitRangesNeverMatchSpaces) {
  // DeepSeek's CJK class [一-龥ࠀ-一가-퟿] spans U+3000 (ideographic space),
  // but llama.cpp hides spaces from such ranges, so the space splits the run.
  EXPECT_EQ(split("deepseek-llm", "\xE4\xB8\xAD\xE3\x80\x80\xE6\x96\x87"),
            (Pieces{"\xE4\xB8\xAD", "\xE3\x80\x80", "\xE6\x96\x87"}));
  EXPECT_EQ(split("deepseek-llm", "\xE4\xB8\xAD\xE6\x96\x87"),
            (Pieces{"\xE4\xB8\xAD\xE6\x96\x87"}));
}

TEST(PreTokenizer, InvalidBytesSplitLikeReplacementCharacters) {
  // An invalid byte behaves as U+FFFD (a symbol), but the piece keeps the byte.
  EXPECT_EQ(split("gpt-2",
                  "a\xFF"
                  "b"),
            (Pieces{"a", "\xFF", "b"}));
  EXPECT_EQ(split("llama3", "ok \xE2\x82!"), (Pieces{"ok", " \xE2\x82!"}));
}

TEST(PreTokenizer, DefaultSplitsPunctuationFirst) {
  EXPECT_EQ(split("default", "a,b 12345"), (Pieces{"a", ",", "b", " ", "123", "45"}));
  EXPECT_EQ(split("", "a,b"), split("default", "a,b"));
  EXPECT_EQ(split("starcoder", "x12"), (Pieces{"x", "1", "2"}));
}

// GPT-4o / o200k (gpt-oss). Expected pieces follow from llama.cpp's regex:
// [^\r\n\p{L}\p{N}]? U* L+ C? | [^\r\n\p{L}\p{N}]? U+ L* C? | \p{N}{1,3} |
// ' '?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+, with U a letter
// other than a-z, L a letter other than A-Z, C a contraction.
TEST(PreTokenizer, Gpt4oCaseRuns) {
  EXPECT_EQ(split("gpt-4o", "Hello World"), (Pieces{"Hello", " World"}));
  EXPECT_EQ(split("gpt-4o", "camelCase"), (Pieces{"camel", "Case"}));
  // Capitals then lower case letters are one word; capitals alone are one too.
  EXPECT_EQ(split("gpt-4o", "HTTPServer ALLCAPS word"),
            (Pieces{"HTTPServer", " ALLCAPS", " word"}));
  // Only ASCII letters have a case (llama.cpp's rewrite of the case
  // classes): a non-ASCII capital counts as lower case too, so "É" ends a
  // word on its own before the ASCII capitals.
  EXPECT_EQ(split("gpt-4o",
                  "\xC3\x89"
                  "COLE"),
            (Pieces{"\xC3\x89", "COLE"}));
  EXPECT_EQ(split("gpt-4o", "\xC3\xA9t\xC3\xA9"), (Pieces{"\xC3\xA9t\xC3\xA9"}));
  // A combining mark is not part of a word: it starts the next one.
  EXPECT_EQ(split("gpt-4o",
                  "e\xCC\x81"
                  "x"),
            (Pieces{"e",
                    "\xCC\x81"
                    "x"}));
}

TEST(PreTokenizer, Gpt4oContractionsStayWithTheirWord) {
  EXPECT_EQ(split("gpt-4o", "don't I'm DON'T we'Ve"),
            (Pieces{"don't", " I'm", " DON'T", " we'Ve"}));
  // A quote not followed by a contraction is the prefix of the next word.
  EXPECT_EQ(split("gpt-4o", "'sup 'x"), (Pieces{"'sup", " '", "x"}));
}

TEST(PreTokenizer, Gpt4oDigitsCjkAndPunctuation) {
  EXPECT_EQ(split("gpt-4o", "1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(split("gpt-4o", "x1234 12"), (Pieces{"x", "123", "4", " ", "12"}));
  // CJK ideographs are letters of both "cases": one word, glued to Latin.
  EXPECT_EQ(split("gpt-4o", "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C"),
            (Pieces{"\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C"}));
  EXPECT_EQ(split("gpt-4o", "Hello\xE4\xB8\x96\xE7\x95\x8C \xE4\xBD\xA0\xE5\xA5\xBD"),
            (Pieces{"Hello\xE4\xB8\x96\xE7\x95\x8C", " \xE4\xBD\xA0\xE5\xA5\xBD"}));
  // Punctuation keeps trailing newlines and slashes; "/b" is a word.
  EXPECT_EQ(split("gpt-4o", "x!!\n\ny"), (Pieces{"x", "!!\n\n", "y"}));
  EXPECT_EQ(split("gpt-4o", "https://a/b"), (Pieces{"https", "://", "a", "/b"}));
}

TEST(PreTokenizer, Gpt4oWhitespace) {
  EXPECT_EQ(split("gpt-4o", "a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(split("gpt-4o", "a\n\nb"), (Pieces{"a", "\n\n", "b"}));
  EXPECT_EQ(split("gpt-4o", "a \n b"), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(split("gpt-4o", "a\t\t"), (Pieces{"a", "\t\t"}));
  EXPECT_EQ(split("llama4", "a  b"), split("gpt-4o", "a  b"));
}

TEST(PreTokenizer, Qwen35KeepsCombiningMarksInWords) {
  // Qwen2 cuts a word at a combining mark; Qwen3.5 keeps it.
  EXPECT_EQ(split("qwen2",
                  "e\xCC\x81"
                  "x"),
            (Pieces{"e",
                    "\xCC\x81"
                    "x"}));
  EXPECT_EQ(split("qwen35",
                  "e\xCC\x81"
                  "x"),
            (Pieces{"e\xCC\x81"
                    "x"}));
  // Devanagari "namaste": the virama and the vowel sign are marks.
  const std::string namaste =
      "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87";
  EXPECT_EQ(split("qwen35", namaste + " x"), (Pieces{namaste, " x"}));
  EXPECT_EQ(split("qwen2", namaste).size(), 3u);
  // Otherwise as Qwen2: single digits, contractions.
  EXPECT_EQ(split("qwen35", "it's 123"), (Pieces{"it", "'s", " ", "1", "2", "3"}));
}

TEST(PreTokenizer, Gemma4SplitsOnlyAtNewlines) {
  EXPECT_EQ(split("gemma4", "ab cd, 12\n\nx\r\n"), (Pieces{"ab cd, 12", "\n\n", "x\r", "\n"}));
  EXPECT_EQ(split("gemma4", "\n"), (Pieces{"\n"}));
  EXPECT_TRUE(pre_tokenizer_spec("gemma4").spm_style);
  EXPECT_FALSE(pre_tokenizer_spec("gpt-4o").spm_style);
}

TEST(PreTokenizer, PiecesAlwaysCoverTheText) {
  std::mt19937 rng(5);
  for (const std::string& pre : supported_pre_tokenizers()) {
    const PreTokenizer p(pre_tokenizer_spec(pre).patterns);
    for (int i = 0; i < 50; ++i) {
      const std::string text = i % 2 ? test::random_utf8(rng, 40) : test::random_bytes(rng, 40);
      const std::vector<size_t> ends = p.split(text);
      size_t prev = 0;
      for (size_t e : ends) {
        ASSERT_GT(e, prev) << pre;  // non-empty, increasing
        prev = e;
      }
      ASSERT_EQ(prev, text.size()) << pre;
    }
  }
}

TEST(PreTokenizer, LongRunsDoNotExhaustTheRegexStack) {
  const std::string spaces(200000, ' '), letters(200000, 'x'), digits(200000, '7');
  for (const char* pre : {"gpt-2", "llama3", "qwen2", "deepseek-llm", "qwen35", "gpt-4o"}) {
    EXPECT_EQ(split(pre, spaces + "y").back(), " y") << pre;
    EXPECT_EQ(split(pre, letters).size(), 1u) << pre;
    EXPECT_FALSE(split(pre, digits).empty()) << pre;
  }
  // GPT-4o's case classes are repeated lookahead groups.
  const std::string capitals(200000, 'X');
  EXPECT_EQ(split("gpt-4o", capitals + "y").size(), 1u);
  EXPECT_EQ(split("gpt-4o", capitals + " ").size(), 2u);
  EXPECT_EQ(split("gemma4", letters + "\n" + spaces).size(), 3u);
}

TEST(PreTokenizer, UnknownNameIsAnError) {
  try {
    pre_tokenizer_spec("not-a-tokenizer");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.pre 'not-a-tokenizer'"),
              std::string::npos);
    EXPECT_NE(std::string(e.what()).find("llama-bpe"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("gpt-4o"), std::string::npos);
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace tkv::tok
