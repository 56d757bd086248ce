// decode(encode(s)) == s, byte for byte, on every shared vocabulary.
#include <gtest/gtest.h>

#include <random>

#include "fixtures.h"
#include "random_text.h"
#include "tokenizer/utf8.h"

namespace tkv::tok::test {
namespace {

std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string h;
  for (unsigned char c : s) {
    h += d[c >> 4];
    h += d[c & 15];
    h += ' ';
  }
  return h;
}

void expect_round_trip(const Tokenizer& tok, const std::string& s, bool add_special) {
  const std::vector<int32_t> ids = tok.encode(s, add_special, false);
  const std::string back = tok.decode(ids);
  EXPECT_EQ(back, s) << "bytes: " << hex(s) << "\nids: " << ids_to_string(ids);
}

class RoundTrip : public ::testing::TestWithParam<std::string> {
 protected:
  const Tokenizer* load() { return load_fixture_tokenizer(GetParam()); }
};

TEST_P(RoundTrip, RandomUtf8) {
  const Tokenizer* tok = load();
  if (!tok) TKV_MISSING_FIXTURE << "fixture " << GetParam() << " not found (set TURBOKV_MODELS)";
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    const std::string s = random_utf8(rng, 60);
    ASSERT_TRUE(utf8_is_valid(s));
    expect_round_trip(*tok, s, /*add_special=*/i % 2 == 0);
    if (HasFailure()) return;
  }
}

TEST_P(RoundTrip, FixedHardCases) {
  const Tokenizer* tok = load();
  if (!tok) TKV_MISSING_FIXTURE << "fixture " << GetParam() << " not found (set TURBOKV_MODELS)";
  const std::string cases[] = {
      "",
      " ",
      "  leading and trailing  ",
      "\n\n\t \r\n",
      "e\xCC\x81 combining acute, \xE2\x80\x8D zero-width joiner",
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 family emoji",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xE3\x80\x80ideographic space",
      "12345678901234567890 3.14159 1,000,000",
      "<|eot_id|><|im_end|><s>[INST] control-token texts as plain text",
      "It's 'quoted' -- don't, WON'T, we'Ve",
  };
  for (const std::string& s : cases) {
    expect_round_trip(*tok, s, false);
    expect_round_trip(*tok, s, true);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllVocabs, RoundTrip,
    ::testing::Values("vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-phi-3.gguf",
                      "vocab/ggml-vocab-llama-bpe.gguf", "vocab/ggml-vocab-qwen2.gguf",
                      "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-deepseek-llm.gguf",
                      "vocab/ggml-vocab-gemma-4.gguf", "vocab/ggml-vocab-qwen35.gguf",
                      "stories260K.gguf", "tkv-test-23M.gguf"),
    [](const auto& info) {
      std::string n = info.param;
      std::string out;
      for (char c : n.substr(n.rfind('/') + 1))
        out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return out;
    });

// Arbitrary bytes, mostly invalid UTF-8: SPM spells them with <0xNN> byte
// tokens, byte-level BPE with its 256-character alphabet. (DeepSeek's
// vocabulary is left out: it reuses the byte-alphabet spellings of the bytes
// that never occur in UTF-8, such as "ø" for 0xF8, as user-defined tokens
// that decode to the character itself.)
class InvalidUtf8RoundTrip : public RoundTrip {};

TEST_P(InvalidUtf8RoundTrip, RandomBytes) {
  const Tokenizer* tok = load();
  if (!tok) TKV_MISSING_FIXTURE << "fixture " << GetParam() << " not found (set TURBOKV_MODELS)";
  std::mt19937 rng(99);
  int invalid = 0;
  for (int i = 0; i < 300; ++i) {
    const std::string s = random_bytes(rng, 40);
    invalid += !utf8_is_valid(s);
    expect_round_trip(*tok, s, i % 2 == 0);
    if (HasFailure()) return;
  }
  EXPECT_GT(invalid, 250);  // the generator really exercises invalid input
}

TEST_P(InvalidUtf8RoundTrip, MalformedSequences) {
  const Tokenizer* tok = load();
  if (!tok) TKV_MISSING_FIXTURE << "fixture " << GetParam() << " not found (set TURBOKV_MODELS)";
  const std::string cases[] = {
      "\x80",                    // lone continuation byte
      "abc\xE2\x82",             // truncated 3-byte sequence at the end
      "\xE2\x82 x",              // truncated, then ASCII
      "\xC0\x80 overlong NUL",   // overlong encoding
      "\xED\xA0\x80 surrogate",  // UTF-16 surrogate encoded in UTF-8
      "\xF4\x90\x80\x80 > U+10FFFF",
      "\xFF\xFE\xF5\xF8 never in UTF-8",
      "mixed \xE4\xBD\xA0\xA0\xE5\xA5 \xF0\x9F\x98",
      std::string("nul\0byte", 8),
  };
  for (const std::string& s : cases) expect_round_trip(*tok, s, false);
}

INSTANTIATE_TEST_SUITE_P(
    ByteCapableVocabs, InvalidUtf8RoundTrip,
    ::testing::Values("vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-phi-3.gguf",
                      "vocab/ggml-vocab-llama-bpe.gguf", "vocab/ggml-vocab-qwen2.gguf",
                      "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-gemma-4.gguf",
                      "vocab/ggml-vocab-qwen35.gguf", "stories260K.gguf", "tkv-test-23M.gguf"),
    [](const auto& info) {
      std::string n = info.param;
      std::string out;
      for (char c : n.substr(n.rfind('/') + 1))
        out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return out;
    });

}  // namespace
}  // namespace tkv::tok::test
