// The stream decoder against Tokenizer::decode: after every token, what was
// emitted is a prefix of decode(ids so far), made of complete characters,
// and after flush() it is all of it.
#include <gtest/gtest.h>

#include <random>

#include "fixtures.h"
#include "random_text.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/utf8.h"

namespace tkv::tok::test {
namespace {

void check_every_prefix(const Tokenizer& tok, const std::string& text, bool valid_input) {
  const std::vector<int32_t> ids = tok.encode(text, /*add_special=*/true, false);
  StreamDecoder stream(tok, StreamDecoder::Start::kTextStart);
  std::string emitted;
  for (size_t k = 0; k < ids.size(); ++k) {
    emitted += stream.push(ids[k]);
    const std::vector<int32_t> prefix(ids.begin(), ids.begin() + ptrdiff_t(k) + 1);
    const std::string full = tok.decode(prefix);
    ASSERT_EQ(full.compare(0, emitted.size(), emitted), 0) << "prefix " << k + 1;
    ASSERT_EQ(emitted.size() + stream.pending_bytes(), full.size());
    if (valid_input) {
      ASSERT_TRUE(utf8_is_valid(emitted)) << "prefix " << k + 1;
    }
    // A decoder that stops here and flushes reproduces decode() exactly.
    StreamDecoder replay(tok, StreamDecoder::Start::kTextStart);
    std::string out;
    for (int32_t id : prefix) out += replay.push(id);
    out += replay.flush();
    ASSERT_EQ(out, full);
  }
  emitted += stream.flush();
  EXPECT_EQ(emitted, text);
}

class StreamVsDecode : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamVsDecode, EveryPrefixOfRandomText) {
  const Tokenizer* tok = load_fixture_tokenizer(GetParam());
  if (!tok) TKV_MISSING_FIXTURE << "fixture " << GetParam() << " not found (set TURBOKV_MODELS)";
  std::mt19937 rng(7);
  for (int i = 0; i < 40; ++i) {
    check_every_prefix(*tok, random_utf8(rng, 30), true);
    if (HasFatalFailure()) return;
  }
  for (int i = 0; i < 20; ++i) {
    check_every_prefix(*tok, random_bytes(rng, 20), false);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, StreamVsDecode,
                         ::testing::Values("vocab/ggml-vocab-llama-spm.gguf",
                                           "vocab/ggml-vocab-llama-bpe.gguf",
                                           "vocab/ggml-vocab-qwen2.gguf", "stories260K.gguf"),
                         [](const auto& info) {
                           std::string out;
                           for (char c : info.param.substr(info.param.rfind('/') + 1))
                             out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return out;
                         });

TEST(StreamDecoder, HoldsBackAPartialCharacterUntilComplete) {
  TKV_REQUIRE_TOKENIZER(tok, "stories260K.gguf");
  // stories260K has 512 tokens: a CJK character falls back to three byte tokens.
  const std::vector<int32_t> ids = tok->encode("\xE4\xBD\xA0", false, false);  // 你
  ASSERT_EQ(ids.size(), 4u);  // "▁" + <0xE4> <0xBD> <0xA0>
  StreamDecoder s(*tok, StreamDecoder::Start::kContinuation);
  EXPECT_EQ(s.push(ids[0]), " ");
  EXPECT_EQ(s.push(ids[1]), "");
  EXPECT_EQ(s.push(ids[2]), "");
  EXPECT_EQ(s.pending_bytes(), 2u);
  EXPECT_EQ(s.push(ids[3]), "\xE4\xBD\xA0");
  EXPECT_EQ(s.flush(), "");
}

TEST(StreamDecoder, EmitsInvalidBytesInsteadOfLosingThem) {
  TKV_REQUIRE_TOKENIZER(tok, "stories260K.gguf");
  const int32_t xff = tok->find_token("<0xFF>"), xe4 = tok->find_token("<0xE4>");
  const int32_t a = tok->find_token("a");
  ASSERT_NE(xff, kNoToken);
  ASSERT_NE(a, kNoToken);
  StreamDecoder s(*tok);
  EXPECT_EQ(s.push(xff), "\xFF");  // can never start a character: out at once
  EXPECT_EQ(s.push(xe4), "");      // may still be completed
  EXPECT_EQ(s.push(a),
            "\xE4"
            "a");  // now it cannot: both bytes go out
  EXPECT_EQ(s.push(xe4), "");
  EXPECT_EQ(s.flush(), "\xE4");  // an unfinished tail comes out at flush
}

TEST(StreamDecoder, ContinuationKeepsLeadingSpaceTextStartDropsIt) {
  TKV_REQUIRE_TOKENIZER(tok, "vocab/ggml-vocab-llama-spm.gguf");
  const std::vector<int32_t> ids = tok->encode("Hello world", true, false);
  ASSERT_EQ(ids.front(), tok->bos());
  StreamDecoder start(*tok, StreamDecoder::Start::kTextStart);
  StreamDecoder cont(*tok, StreamDecoder::Start::kContinuation);
  std::string a, b;
  for (int32_t id : ids) {
    a += start.push(id);
    b += cont.push(id);
  }
  EXPECT_EQ(a + start.flush(), "Hello world");
  EXPECT_EQ(b + cont.flush(), " Hello world");
  start.reset(StreamDecoder::Start::kTextStart);
  EXPECT_EQ(start.push(ids[1]), "Hello");
}

}  // namespace
}  // namespace tkv::tok::test
