// The tokenizers of the real models in the shared fixtures.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "fixtures.h"

namespace tkv::tok::test {
namespace {

TEST(Stories260K, LoadsAndDecodesTheReferenceGeneration) {
  TKV_REQUIRE_TOKENIZER(tok, "stories260K.gguf");
  TKV_REQUIRE_FIXTURE(ref_path, "reference/stories260K.greedy256.json");
  EXPECT_EQ(tok->n_vocab(), 512);
  EXPECT_EQ(tok->type(), VocabType::kSpm);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_EQ(tok->unk(), 0);
  EXPECT_EQ(tok->pad(), kNoToken);  // stored as 0xFFFFFFFF: no padding token
  EXPECT_TRUE(tok->add_bos());
  EXPECT_TRUE(tok->is_eog(2));

  const nlohmann::json ref = nlohmann::json::parse(read_file(ref_path));
  const std::vector<int32_t> ids = ref.at("ids").get<std::vector<int32_t>>();
  ASSERT_EQ(ids.front(), 1);
  // llama2.c's decoder (which produced the reference text) drops the space
  // of the first piece after BOS, as decode() does.
  EXPECT_EQ(tok->decode(ids), ref.at("text").get<std::string>());
}

TEST(Stories260K, EncodesStoryText) {
  TKV_REQUIRE_TOKENIZER(tok, "stories260K.gguf");
  const std::string text = "Once upon a time, there was a little girl named Lily.";
  const std::vector<int32_t> ids = tok->encode(text, true, false);
  ASSERT_GT(ids.size(), 2u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(tok->token_text(ids[1]), "\xE2\x96\x81Once");  // "▁Once": the space prefix
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(TkvTest23M, DigitsAreSingleTokens) {
  TKV_REQUIRE_TOKENIZER(tok, "tkv-test-23M.gguf");
  EXPECT_EQ(tok->n_vocab(), 4096);
  EXPECT_EQ(tok->type(), VocabType::kSpm);
  const std::string fact = "The access code for Amber Falcon is 48213.";
  const std::vector<int32_t> ids = tok->encode(fact, true, false);
  EXPECT_EQ(tok->decode(ids), fact);
  // The code comes out as "▁" followed by one token per digit.
  std::vector<std::string> tail;
  for (size_t i = ids.size() - 7; i < ids.size(); ++i) tail.push_back(tok->token_text(ids[i]));
  const std::vector<std::string> expected = {"\xE2\x96\x81", "4", "8", "2", "1", "3", "."};
  EXPECT_EQ(tail, expected);
  for (char d = '0'; d <= '9'; ++d) EXPECT_NE(tok->find_token(std::string(1, d)), kNoToken) << d;

  const std::string question = " Question: what is the access code for Amber Falcon? Answer:";
  const std::vector<int32_t> q = tok->encode(question, false, false);
  EXPECT_EQ(tok->decode(q), question);
}

TEST(TkvTest23M, HeldOutTextRoundTrips) {
  TKV_REQUIRE_TOKENIZER(tok, "tkv-test-23M.gguf");
  TKV_REQUIRE_FIXTURE(path, "tkv-test-heldout.txt");
  const std::string text = read_file(path);
  const std::vector<int32_t> ids = tok->encode(text, true, false);
  // A trained 4096-token vocabulary compresses English several-fold.
  EXPECT_LT(ids.size(), text.size() / 2);
  EXPECT_EQ(tok->decode(ids), text);
}

}  // namespace
}  // namespace tkv::tok::test
