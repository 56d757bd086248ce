// Special tokens: parse_special on request, user-defined tokens always,
// control-token text as plain text otherwise, BOS/EOS per vocabulary flags,
// end-of-generation detection.
#include <gtest/gtest.h>

#include "common/error.h"
#include "fixtures.h"

namespace tkv::tok::test {
namespace {

std::vector<int32_t> concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(SpecialTokens, Llama3ControlTokensParsedOnlyOnRequest) {
  TKV_REQUIRE_TOKENIZER(tok, "vocab/ggml-vocab-llama-bpe.gguf");
  const int32_t begin = tok->find_token("<|begin_of_text|>");
  const int32_t header = tok->find_token("<|start_header_id|>");
  const int32_t eot = tok->find_token("<|eot_id|>");
  ASSERT_EQ(begin, 128000);
  ASSERT_EQ(eot, 128009);
  const std::string text = "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>";

  const std::vector<int32_t> parsed = tok->encode(text, false, true);
  const std::vector<int32_t> expected = concat({{header},
                                                tok->encode("user", false, false),
                                                {tok->find_token("<|end_header_id|>")},
                                                tok->encode("\n\nHi", false, false),
                                                {eot}});
  EXPECT_EQ(parsed, expected);

  // Without parse_special the markers are ordinary text: no control token
  // appears, and the text comes back unchanged.
  const std::vector<int32_t> plain = tok->encode(text, false, false);
  for (int32_t id : plain) EXPECT_FALSE(tok->is_control(id)) << id;
  EXPECT_EQ(tok->decode(plain), text);
  EXPECT_GT(plain.size(), parsed.size());
}

TEST(SpecialTokens, RenderSpecialControlsDecoding) {
  TKV_REQUIRE_TOKENIZER(tok, "vocab/ggml-vocab-llama-bpe.gguf");
  const std::vector<int32_t> ids = tok->encode("<|eot_id|>ok", false, true);
  ASSERT_EQ(ids.front(), 128009);
  EXPECT_EQ(tok->decode(ids), "ok");
  EXPECT_EQ(tok->decode(ids, /*render_special=*/true), "<|eot_id|>ok");
  EXPECT_EQ(tok->token_to_piece(128009), "");
  EXPECT_EQ(tok->token_to_piece(128009, true), "<|eot_id|>");
}

TEST(SpecialTokens, LongestTokenWins) {
  TKV_REQUIRE_TOKENIZER(tok, "vocab/ggml-vocab-llama-bpe.gguf");
  // "<|reserved_special_token_10|>" must not be read as "<|reserved_special_token_1" + "0|>".
  const int32_t t10 = tok->find_token("<|reserved_special_token_10|>");
  ASSERT_NE(t10, kNoToken);
  EXPECT_EQ(tok->encode("<|reserved_special_token_10|>", false, true), std::vector<int32_t>{t10});
}

TEST(SpecialTokens, BosEosFollowVocabularyFlags) {
  TKV_REQUIRE_TOKENIZER(llama3, "vocab/ggml-vocab-llama-bpe.gguf");
  TKV_REQUIRE_TOKENIZER(qwen2, "vocab/ggml-vocab-qwen2.gguf");
  TKV_REQUIRE_TOKENIZER(spm, "vocab/ggml-vocab-llama-spm.gguf");
  // Llama 3 adds BOS (implied by its pre-tokenizer), Qwen2 does not, Llama 2 does.
  EXPECT_TRUE(llama3->add_bos());
  EXPECT_EQ(llama3->encode("hi", true, false).front(), 128000);
  EXPECT_FALSE(qwen2->add_bos());
  EXPECT_EQ(qwen2->encode("hi", true, false), qwen2->encode("hi", false, false));
  EXPECT_EQ(spm->encode("hi", true, false).front(), 1);
  EXPECT_EQ(spm->encode("", true, false), std::vector<int32_t>{1});
  EXPECT_TRUE(spm->encode("", false, false).empty());
  for (const Tokenizer* t : {llama3, qwen2, spm}) {
    EXPECT_FALSE(t->add_eos());
    const auto ids = t->encode("hi", true, false);
    EXPECT_NE(ids.back(), t->eos());
  }
}

TEST(SpecialTokens, UserDefinedTokensAreSplitEvenWithoutParseSpecial) {
  TKV_REQUIRE_TOKENIZER(tok, "vocab/ggml-vocab-qwen2.gguf");
  // Qwen2's [PADnnn] tokens are user-defined: like Hugging Face, llama.cpp
  // cuts them out of plain text too.
  const int32_t pad = tok->find_token("[PAD151646]");
  ASSERT_EQ(pad, 151646);
  const std::vector<int32_t> ids = tok->encode("a[PAD151646]b", false, false);
  EXPECT_EQ(ids, concat({tok->encode("a", false, false), {pad}, tok->encode("b", false, false)}));
  EXPECT_EQ(tok->decode(ids), "a[PAD151646]b");
}

TEST(SpecialTokens, Phi3SpecialTokensStripFollowingWhitespace) {
  TKV_REQUIRE_TOKENIZER(tok, "vocab/ggml-vocab-phi-3.gguf");
  const int32_t user = tok->find_token("<|user|>"), end = tok->find_token("<|end|>"),
                assistant = tok->find_token("<|assistant|>");
  ASSERT_EQ(user, 32010);
  // Phi-3's special tokens eat the newline after them, and the SPM text that
  // follows a special token gets the space prefix again.
  EXPECT_EQ(tok->encode("<|user|>\nHi<|end|>\n<|assistant|>\n", false, true),
            concat({{user}, tok->encode("Hi", false, false), {end, assistant}}));
  // "</s>" is user-defined in this vocabulary: split without parse_special,
  // with the same whitespace stripping.
  EXPECT_EQ(tok->encode("a</s>  b", false, false),
            concat({tok->encode("a", false, false), {2}, tok->encode("b", false, false)}));
}

TEST(SpecialTokens, EndOfGeneration) {
  TKV_REQUIRE_TOKENIZER(llama3, "vocab/ggml-vocab-llama-bpe.gguf");
  EXPECT_EQ(llama3->eot(), 128009);
  EXPECT_TRUE(llama3->is_eog(128009));  // <|eot_id|>
  EXPECT_TRUE(llama3->is_eog(128001));  // <|end_of_text|> (EOS)
  EXPECT_FALSE(llama3->is_eog(128000));
  EXPECT_FALSE(llama3->is_eog(-1));
  EXPECT_FALSE(llama3->is_eog(llama3->n_vocab()));

  TKV_REQUIRE_TOKENIZER(qwen2, "vocab/ggml-vocab-qwen2.gguf");
  EXPECT_EQ(qwen2->eot(), qwen2->find_token("<|im_end|>"));
  EXPECT_TRUE(qwen2->is_eog(qwen2->find_token("<|im_end|>")));
  EXPECT_TRUE(qwen2->is_eog(qwen2->find_token("<|endoftext|>")));
  EXPECT_FALSE(qwen2->is_eog(qwen2->find_token("<|im_start|>")));

  TKV_REQUIRE_TOKENIZER(phi3, "vocab/ggml-vocab-phi-3.gguf");
  EXPECT_TRUE(phi3->is_eog(phi3->find_token("<|end|>")));
  EXPECT_TRUE(phi3->is_eog(32000));  // EOS <|endoftext|>
}

// gpt-oss (o200k_harmony): <|return|> and <|call|> end the generation, so
// <|end|> (end of a message) does not, and becomes user-defined like the
// message-structure tokens, which are then cut out of plain text and always
// rendered (llama.cpp's rules for this vocabulary).
TEST(SpecialTokens, HarmonyTokens) {
  Vocab v;
  v.type = VocabType::kBpe;
  v.pre = "gpt-4o";
  v.tokens = {"a",       "b",          "<|start|>", "<|channel|>",  "<|message|>",
              "<|end|>", "<|return|>", "<|call|>",  "<|endoftext|>"};
  v.types.assign(v.tokens.size(), TokenType::kControl);
  v.types[0] = v.types[1] = TokenType::kNormal;
  v.merges = {"a b"};
  const Tokenizer t(v);
  EXPECT_TRUE(t.is_eog(6));
  EXPECT_TRUE(t.is_eog(7));
  EXPECT_TRUE(t.is_eog(8));
  EXPECT_FALSE(t.is_eog(5));
  EXPECT_EQ(t.eog_ids(), (std::vector<int32_t>{6, 7, 8}));
  for (int32_t id : {2, 3, 4, 5}) EXPECT_FALSE(t.is_control(id)) << id;
  EXPECT_TRUE(t.is_control(6));
  const std::vector<int32_t> ids = t.encode("<|start|>a<|channel|>b<|message|>ab<|end|>", false,
                                            /*parse_special=*/false);
  EXPECT_EQ(ids, (std::vector<int32_t>{2, 0, 3, 1, 4, 0, 1, 5}));
  EXPECT_EQ(t.decode(ids), "<|start|>a<|channel|>b<|message|>ab<|end|>");
  EXPECT_EQ(t.decode(std::vector<int32_t>{0, 6}), "a");

  // Without <|return|> and <|call|> (Phi-3), <|end|> stays an end of generation.
  v.tokens[6] = "x";
  v.tokens[7] = "y";
  const Tokenizer no_harmony(std::move(v));
  EXPECT_TRUE(no_harmony.is_eog(5));
  EXPECT_TRUE(no_harmony.is_control(5));
}

TEST(SpecialTokens, Gemma4) {
  TKV_REQUIRE_TOKENIZER(tok, "vocab/ggml-vocab-gemma-4.gguf");
  EXPECT_EQ(tok->pre_tokenizer(), "gemma4");
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_space_prefix());
  EXPECT_EQ(tok->encode("Hi", true, false).front(), 2);  // <bos>
  const int32_t turn_open = tok->find_token("<|turn>"), turn_close = tok->find_token("<turn|>");
  const int32_t tool_response = tok->find_token("<|tool_response>");
  ASSERT_EQ(turn_close, 106);
  EXPECT_TRUE(tok->is_eog(1));  // <eos>
  EXPECT_TRUE(tok->is_eog(turn_close));
  EXPECT_TRUE(tok->is_eog(tool_response));
  EXPECT_FALSE(tok->is_eog(turn_open));
  EXPECT_FALSE(tok->is_eog(tok->find_token("</s>")));
  // <|tool_response> is user-defined in the file but, as an end of
  // generation, control: plain text never produces it.
  EXPECT_TRUE(tok->is_control(tool_response));
  const std::vector<int32_t> plain = tok->encode("<|tool_response>", false, false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(tok->encode("<|tool_response>", false, true), std::vector<int32_t>{tool_response});
  const std::vector<int32_t> turn = tok->encode("<|turn>user\nHi<turn|>", false, true);
  EXPECT_EQ(turn.front(), turn_open);
  EXPECT_EQ(turn.back(), turn_close);
  EXPECT_EQ(tok->decode(turn, true), "<|turn>user\nHi<turn|>");
}

TEST(SpecialTokens, BadIdsAreErrors) {
  TKV_REQUIRE_TOKENIZER(tok, "vocab/ggml-vocab-gpt-2.gguf");
  EXPECT_THROW(tok->token_to_piece(-1), Error);
  EXPECT_THROW(tok->token_to_piece(tok->n_vocab()), Error);
  EXPECT_THROW(tok->token_text(tok->n_vocab()), Error);
  const std::vector<int32_t> bad = {0, 99999999};
  EXPECT_THROW(tok->decode(bad), Error);
}

}  // namespace
}  // namespace tkv::tok::test
