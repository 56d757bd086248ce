// SPM and BPE on small hand-built vocabularies, where the expected result
// can be worked out by hand: merge order by score / rank, tie-breaking,
// byte fallback, ignore_merges, and vocabulary validation.
#include <gtest/gtest.h>

#include <cstdio>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/test_util.h"
#include "gguf/gguf.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer.h"

namespace tkv::tok {
namespace {

const std::string kSp = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// <unk> <s> </s>, the 256 byte tokens, then `pieces` with `scores`.
Vocab spm_vocab(const std::vector<std::string>& pieces, const std::vector<float>& scores) {
  Vocab v;
  v.type = VocabType::kSpm;
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    v.tokens.push_back(name);
    v.types.push_back(TokenType::kByte);
  }
  v.scores.assign(v.tokens.size(), 0.0f);
  for (size_t i = 0; i < pieces.size(); ++i) {
    v.tokens.push_back(pieces[i]);
    v.types.push_back(TokenType::kNormal);
    v.scores.push_back(scores[i]);
  }
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

std::vector<std::string> texts(const Tokenizer& t, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(t.token_text(id));
  return out;
}

using Strings = std::vector<std::string>;

TEST(Spm, HighestScoringPairMergesFirst) {
  // "ab" -> "▁ab": symbols ▁ a b; candidates "▁a" and "ab".
  const Tokenizer a_first(spm_vocab({kSp, "a", "b", kSp + "a", "ab"}, {0, 0, 0, -1, -2}));
  EXPECT_EQ(texts(a_first, a_first.encode("ab", false, false)), (Strings{kSp + "a", "b"}));
  const Tokenizer ab_first(spm_vocab({kSp, "a", "b", kSp + "a", "ab"}, {0, 0, 0, -2, -1}));
  EXPECT_EQ(texts(ab_first, ab_first.encode("ab", false, false)), (Strings{kSp, "ab"}));
  // Merging continues over merged pieces: "▁" + "ab" -> "▁ab".
  const Tokenizer chain(spm_vocab({kSp, "a", "b", "ab", kSp + "ab"}, {0, 0, 0, -1, -3}));
  EXPECT_EQ(texts(chain, chain.encode("ab", false, false)), (Strings{kSp + "ab"}));
}

TEST(Spm, EqualScoresMergeLeftmostFirst) {
  Vocab v = spm_vocab({"a", "aa"}, {0, -1});
  v.add_space_prefix = false;
  const Tokenizer t(std::move(v));
  EXPECT_EQ(texts(t, t.encode("aaa", false, false)), (Strings{"aa", "a"}));
}

TEST(Spm, SpacesBecomeU2581AndPrefixIsOptional) {
  Vocab v = spm_vocab({kSp, "a", kSp + "a"}, {0, 0, -1});
  const Tokenizer with_prefix(v);
  EXPECT_EQ(texts(with_prefix, with_prefix.encode("a a", false, false)),
            (Strings{kSp + "a", kSp + "a"}));
  EXPECT_EQ(with_prefix.decode(with_prefix.encode("a a", true, false)), "a a");
  v.add_space_prefix = false;
  const Tokenizer no_prefix(std::move(v));
  EXPECT_EQ(texts(no_prefix, no_prefix.encode("a a", false, false)), (Strings{"a", kSp + "a"}));
  EXPECT_EQ(no_prefix.decode(no_prefix.encode(" a", false, false)), " a");
}

// Gemma 3: SentencePiece with tokenizer.ggml.add_space_prefix = false and
// turn markers as control tokens. llama.cpp then adds no U+2581 at the start
// of the text nor after a special token; spaces in the text still become
// U+2581, and decoding keeps every space.
TEST(Spm, Gemma3StyleWithoutSpacePrefix) {
  Vocab v = spm_vocab(
      {kSp, kSp + kSp, "a", "b", kSp + "a", kSp + "b", "\n", "<start_of_turn>", "<end_of_turn>"},
      {0, -1, 0, 0, -2, -2, 0, 0, 0});
  const int32_t sot = v.n_tokens() - 2, eot = v.n_tokens() - 1;
  v.types[size_t(sot)] = v.types[size_t(eot)] = TokenType::kControl;
  v.add_space_prefix = false;
  const Tokenizer t(v);
  EXPECT_FALSE(t.add_space_prefix());
  EXPECT_EQ(texts(t, t.encode("a b", false, false)), (Strings{"a", kSp + "b"}));
  EXPECT_EQ(texts(t, t.encode(" a", false, false)), (Strings{kSp + "a"}));
  // "▁▁" outscores "▁a": two leading spaces stay together.
  EXPECT_EQ(texts(t, t.encode("  a", false, false)), (Strings{kSp + kSp, "a"}));
  EXPECT_EQ(texts(t, t.encode("<start_of_turn>a b\n<end_of_turn>", true, true)),
            (Strings{"<s>", "<start_of_turn>", "a", kSp + "b", "\n", "<end_of_turn>"}));
  for (const std::string s : {"a b", " a", "  a b ", "\na  b\n"}) {
    EXPECT_EQ(t.decode(t.encode(s, true, false)), s);
  }
  // The same vocabulary with the prefix: a U+2581 at the start and after
  // each special token.
  v.add_space_prefix = true;
  const Tokenizer with_prefix(std::move(v));
  EXPECT_EQ(texts(with_prefix, with_prefix.encode("<start_of_turn>a<end_of_turn>b", false, true)),
            (Strings{"<start_of_turn>", kSp + "a", "<end_of_turn>", kSp + "b"}));
}

// Gemma 4: BPE over SentencePiece spellings. Spaces become U+2581, words are
// the runs between newlines (so merges cross spaces), symbols are whole
// UTF-8 characters, and a piece that is not a token falls back to <0xNN>.
Vocab gemma4_vocab(std::vector<std::string> merges) {
  Vocab v;
  v.type = VocabType::kBpe;
  v.pre = "gemma4";
  v.tokens = {"<pad>", "<eos>", "<bos>"};
  v.types = {TokenType::kControl, TokenType::kControl, TokenType::kControl};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    v.tokens.push_back(name);
    v.types.push_back(TokenType::kByte);
  }
  for (std::string t :
       {kSp, std::string("a"), std::string("b"), kSp + "a", std::string("ab"), "a" + kSp,
        std::string("\n"), std::string("\n\n\n"), std::string("\xC3\xA9")}) {
    v.tokens.push_back(t);
    v.types.push_back(TokenType::kNormal);
  }
  v.merges = std::move(merges);
  v.bos = 2;
  v.eos = 1;
  v.add_bos = true;
  return v;
}

TEST(Bpe, Gemma4StyleMergesRawCharactersAcrossSpaces) {
  const std::string sp_a = kSp + "a", a_sp = "a" + kSp;
  const Tokenizer sp_first(gemma4_vocab({kSp + " a", "a b"}));
  EXPECT_EQ(sp_first.pre_tokenizer(), "gemma4");
  EXPECT_EQ(texts(sp_first, sp_first.encode("a ab", true, false)),
            (Strings{"<bos>", "a", sp_a, "b"}));
  const Tokenizer ab_first(gemma4_vocab({"a b", kSp + " a"}));
  EXPECT_EQ(texts(ab_first, ab_first.encode("a ab", false, false)), (Strings{"a", kSp, "ab"}));
  // "a▁" is a merge across the space, which a byte-level BPE never sees.
  const Tokenizer across(gemma4_vocab({"a " + kSp, "a b"}));
  EXPECT_EQ(texts(across, across.encode("a ab", false, false)), (Strings{a_sp, "ab"}));
  // "é" is one symbol (a token); "ü" is not a token: its bytes.
  EXPECT_EQ(texts(across, across.encode("\xC3\xA9\xC3\xBC", false, false)),
            (Strings{"\xC3\xA9", "<0xC3>", "<0xBC>"}));
  for (const std::string s : {"a ab", " a\n\n\nb  ", "\xC3\xA9\xC3\xBC x", "\xFF\xC3"}) {
    EXPECT_EQ(across.decode(across.encode(s, true, false)), s);
  }
}

TEST(Bpe, Gemma4StyleNewlineRunsThatAreTokensAreTakenWhole) {
  const Tokenizer t(gemma4_vocab({"a b"}));
  // No merges build "\n\n\n", but it is a token; "\n\n" is not.
  EXPECT_EQ(texts(t, t.encode("a\n\n\nb", false, false)), (Strings{"a", "\n\n\n", "b"}));
  EXPECT_EQ(texts(t, t.encode("\n\n", false, false)), (Strings{"\n", "\n"}));
}

TEST(Spm, UnknownCharactersFallBackToBytes) {
  const Tokenizer t(spm_vocab({kSp, "a"}, {0, 0}));
  // "é" is not a token: its two UTF-8 bytes become <0xC3> <0xA9>.
  EXPECT_EQ(texts(t, t.encode("a\xC3\xA9", false, false)), (Strings{kSp, "a", "<0xC3>", "<0xA9>"}));
  EXPECT_EQ(t.decode(t.encode("a\xC3\xA9", false, false)), "a\xC3\xA9");
}

TEST(Spm, WithoutByteTokensUsesUnknownOrFails) {
  Vocab v;
  v.type = VocabType::kSpm;
  v.tokens = {"<unk>", "a"};
  v.types = {TokenType::kUnknown, TokenType::kNormal};
  v.unk = 0;
  const Tokenizer with_unk(v);
  EXPECT_EQ(with_unk.encode("ab", false, false), (std::vector<int32_t>{1, 0}));
  v.unk = kNoToken;
  const Tokenizer without(std::move(v));
  EXPECT_THROW(without.encode("ab", false, false), Error);
  EXPECT_EQ(without.encode("aa", false, false), (std::vector<int32_t>{1, 1}));
}

// A byte-level BPE vocabulary over the letters a..c (which spell themselves
// in GPT-2's byte alphabet) plus "Ġ" for the space.
Vocab bpe_vocab(std::vector<std::string> merges, std::string pre = "gpt-2") {
  Vocab v;
  v.type = VocabType::kBpe;
  v.pre = std::move(pre);
  v.tokens = {"a",
              "b",
              "c",
              "ab",
              "bc",
              "abc",
              "\xC4\xA0",
              "\xC4\xA0"
              "a"};
  v.merges = std::move(merges);
  return v;
}

TEST(Bpe, LowerRankMergesFirst) {
  const Tokenizer ab_first(bpe_vocab({"a b", "b c"}));
  EXPECT_EQ(texts(ab_first, ab_first.encode("abc", false, false)), (Strings{"ab", "c"}));
  const Tokenizer bc_first(bpe_vocab({"b c", "a b"}));
  EXPECT_EQ(texts(bc_first, bc_first.encode("abc", false, false)), (Strings{"a", "bc"}));
  const Tokenizer full(bpe_vocab({"a b", "ab c"}));
  EXPECT_EQ(texts(full, full.encode("abc", false, false)), (Strings{"abc"}));
  // Words are merged separately: the space starts the second word ("Ġa").
  const Tokenizer space(bpe_vocab({"\xC4\xA0 a", "a b"}));
  EXPECT_EQ(texts(space, space.encode("ab a", false, false)), (Strings{"ab",
                                                                       "\xC4\xA0"
                                                                       "a"}));
  EXPECT_EQ(space.decode(space.encode("ab a", false, false)), "ab a");
}

TEST(Bpe, IgnoreMergesTakesWholeWordTokens) {
  // Llama 3's pre-tokenizer: a word that is a token is taken whole, even when
  // the merges would not build it.
  const Tokenizer gpt2(bpe_vocab({"a b"}, "gpt-2"));
  EXPECT_EQ(texts(gpt2, gpt2.encode("abc", false, false)), (Strings{"ab", "c"}));
  const Tokenizer llama3(bpe_vocab({"a b"}, "llama-bpe"));
  EXPECT_EQ(texts(llama3, llama3.encode("abc", false, false)), (Strings{"abc"}));
}

TEST(Bpe, MissingByteCharactersAreAnError) {
  // 'd' has no token and there is no unknown token.
  const Tokenizer t(bpe_vocab({"a b"}));
  EXPECT_THROW(t.encode("d", false, false), Error);
}

TEST(Vocab, ValidationNamesTheKey) {
  auto expect_error = [](Vocab v, const std::string& key) {
    try {
      Tokenizer t(std::move(v));
      ADD_FAILURE() << "no error, expected one naming " << key;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  Vocab ok = spm_vocab({"a"}, {0});
  EXPECT_NO_THROW(Tokenizer{ok});

  Vocab v = ok;
  v.scores.pop_back();
  expect_error(v, "tokenizer.ggml.scores");
  v = ok;
  v.types.push_back(TokenType::kNormal);
  expect_error(v, "tokenizer.ggml.token_type");
  v = ok;
  v.types[3] = TokenType(9);
  expect_error(v, "tokenizer.ggml.token_type[3]");
  v = ok;
  v.types[259] = TokenType::kByte;  // "a" marked as a byte token
  expect_error(v, "tokenizer.ggml.token_type[259]");
  v = ok;
  v.bos = v.n_tokens();
  expect_error(v, "tokenizer.ggml.bos_token_id");
  v = ok;
  v.unk = -5;
  expect_error(v, "tokenizer.ggml.unknown_token_id");
  v = ok;
  v.bos = kNoToken;
  expect_error(v, "tokenizer.ggml.add_bos_token");
  v = ok;
  v.tokens.clear();
  expect_error(v, "tokenizer.ggml.tokens");

  expect_error(bpe_vocab({}), "tokenizer.ggml.merges");
  expect_error(bpe_vocab({"a b", "ab"}), "tokenizer.ggml.merges[1]");
  expect_error(bpe_vocab({"a b"}, "no-such-pre"), "tokenizer.ggml.pre");
}

}  // namespace
}  // namespace tkv::tok

namespace tkv::tok {
namespace {

// Merging word by word (the fast path) must give exactly what merging the
// whole text at once gives, on a real vocabulary and real text.
TEST(Spm, WordByWordEqualsWholeText) {
  const std::string vocab_path = ::tkv::test::model_path("vocab/ggml-vocab-llama-spm.gguf");
  const std::string text_path = ::tkv::test::model_path("tkv-test-heldout.txt");
  if (vocab_path.empty() || text_path.empty()) {
    TKV_MISSING_FIXTURE << "fixtures not found under " << ::tkv::test::models_dir();
  }
  const Vocab v = Vocab::from_gguf(gguf::GgufFile::open(vocab_path));
  ASSERT_TRUE(SpmEncoder::vocab_has_no_inner_space(v.tokens));
  TokenMap map;
  for (int32_t i = 0; i < v.n_tokens(); ++i) map.insert(v.tokens[size_t(i)], i);
  std::array<int32_t, 256> bytes{};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    bytes[size_t(b)] = map.find(name);
  }
  std::string escaped = "\xE2\x96\x81";
  for (char c : read_file(text_path).substr(0, 60000)) {
    if (c == ' ') {
      escaped += "\xE2\x96\x81";
    } else {
      escaped += c;
    }
  }
  escaped += "\xE2\x96\x81\xE2\x96\x81  \xE4\xBD\xA0\xE2\x96\x81\xE2\x96\x81\xE2\x96\x81x";
  std::vector<int32_t> by_word, whole;
  SpmEncoder(map, v.scores, bytes, v.unk, true).encode(escaped, by_word);
  SpmEncoder(map, v.scores, bytes, v.unk, false).encode(escaped, whole);
  EXPECT_GT(whole.size(), 10000u);
  EXPECT_EQ(by_word, whole);
}

TEST(Spm, InnerSpaceTokensDisableWordByWordMerging) {
  EXPECT_TRUE(
      SpmEncoder::vocab_has_no_inner_space({"\xE2\x96\x81"
                                            "a",
                                            "\xE2\x96\x81\xE2\x96\x81", "b"}));
  EXPECT_FALSE(
      SpmEncoder::vocab_has_no_inner_space({"a\xE2\x96\x81"
                                            "b"}));
  EXPECT_FALSE(
      SpmEncoder::vocab_has_no_inner_space({"\xE2\x96\x81"
                                            "a\xE2\x96\x81"}));
  // With such a token, a merge may cross a word start, and does.
  Vocab v = spm_vocab({kSp, "a", "b", "a" + kSp, "a" + kSp + "b"}, {0, 0, 0, -1, -1});
  v.add_space_prefix = false;
  const Tokenizer t(std::move(v));
  EXPECT_EQ(texts(t, t.encode("a b", false, false)), (Strings{"a" + kSp + "b"}));
}

}  // namespace
}  // namespace tkv::tok
