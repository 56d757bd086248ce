// Vocab::from_gguf on small GGUF files built in memory: defaults, the
// "no token" sentinel, and one clear error (naming file and key) per kind of
// bad metadata.
#include <gtest/gtest.h>

#include <functional>

#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tkv::tok {
namespace {

using gguf::GgufFile;
using gguf::GgufWriter;
using gguf::Value;

// A valid SPM vocabulary: <unk> <s> </s> ▁ a b ▁a.
void add_spm_keys(GgufWriter& w) {
  w.set_string("general.name", "tiny");
  w.set_string("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens",
        Value::make_strings({"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b",
                             "\xE2\x96\x81"
                             "a"}));
  w.set("tokenizer.ggml.scores", Value::make_f32s({0, 0, 0, -1, -2, -3, -1}));
  w.set("tokenizer.ggml.token_type", Value::make_i32s({2, 3, 3, 1, 1, 1, 1}));
}

// Parses the writer's bytes and loads a Tokenizer from them.
struct Loaded {
  std::vector<uint8_t> bytes;
  std::unique_ptr<GgufFile> file;
};
Loaded parse(const GgufWriter& w) {
  Loaded l;
  l.bytes = w.to_bytes();
  l.file = std::make_unique<GgufFile>(GgufFile::parse(l.bytes.data(), l.bytes.size(), "mem.gguf"));
  return l;
}

// Expects Tokenizer::from_gguf to fail with a message naming the file and `what`.
void expect_error(const std::function<void(GgufWriter&)>& edit, const std::string& what) {
  GgufWriter w;
  add_spm_keys(w);
  edit(w);
  const Loaded l = parse(w);
  try {
    Tokenizer::from_gguf(*l.file);
    ADD_FAILURE() << "no error; expected one about " << what;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("mem.gguf: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(GgufVocab, SpmDefaults) {
  GgufWriter w;
  add_spm_keys(w);
  const Loaded l = parse(w);
  const Tokenizer t = Tokenizer::from_gguf(*l.file);
  EXPECT_EQ(t.type(), VocabType::kSpm);
  EXPECT_EQ(t.n_vocab(), 7);
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_EQ(t.unk(), 0);
  EXPECT_TRUE(t.add_bos());
  EXPECT_FALSE(t.add_eos());
  EXPECT_TRUE(t.add_space_prefix());
  EXPECT_EQ(t.encode("a a", true, false), (std::vector<int32_t>{1, 6, 6}));
  EXPECT_EQ(t.chat_template(), "");
}

TEST(GgufVocab, KeysOverrideDefaults) {
  GgufWriter w;
  add_spm_keys(w);
  w.set_u32("tokenizer.ggml.bos_token_id", 2);
  w.set_u32("tokenizer.ggml.eos_token_id", 1);
  w.set_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);  // "none"
  w.set("tokenizer.ggml.add_bos_token", Value::make_bool(false));
  w.set("tokenizer.ggml.add_eos_token", Value::make_bool(true));
  w.set("tokenizer.ggml.add_space_prefix", Value::make_bool(false));
  w.set_string("tokenizer.chat_template", "{% for m in messages %}<|im_start|>{% endfor %}");
  const Loaded l = parse(w);
  const Tokenizer t = Tokenizer::from_gguf(*l.file);
  EXPECT_EQ(t.bos(), 2);
  EXPECT_EQ(t.eos(), 1);
  EXPECT_EQ(t.pad(), kNoToken);
  EXPECT_EQ(t.encode("a", true, false), (std::vector<int32_t>{4, 1}));
  EXPECT_EQ(ChatTemplate::for_tokenizer(t).apply({{"user", "a"}, {"user", "b"}}, true),
            "<|im_start|><|im_start|>");
  EXPECT_EQ(ChatTemplate::for_tokenizer(t).stop_strings(), std::vector<std::string>{});
}

// A template that does not parse fails the load, naming the line and why.
TEST(GgufVocab, ABadChatTemplateFailsWithItsLine) {
  GgufWriter w;
  add_spm_keys(w);
  w.set_string("tokenizer.chat_template",
               "{% for m in messages %}\n{{ m.content | nosuch }}\n{% endfor %}");
  const Loaded l = parse(w);
  const Tokenizer t = Tokenizer::from_gguf(*l.file);
  try {
    ChatTemplate::for_tokenizer(t);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "the model's chat template (tokenizer.chat_template) line 2: no filter named "
                 "'nosuch' (pass "
                 "--chat-template NAME|FILE to use another)");
  }
  EXPECT_EQ(ChatTemplate::for_tokenizer(t, "chatml").name(), "chatml");  // an override still works
}

// tokenizer.ggml.model = "gemma4": SentencePiece-style BPE with the gemma4
// pre-tokenizer whatever tokenizer.ggml.pre says, and BOS always added (as
// llama.cpp does, overriding tokenizer.ggml.add_bos_token = false).
TEST(GgufVocab, Gemma4ModelImpliesItsPreTokenizerAndBos) {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gemma4");
  w.set_string("tokenizer.ggml.pre", "gpt-2");
  w.set("tokenizer.ggml.tokens",
        Value::make_strings({"<pad>", "<eos>", "<bos>", "\xE2\x96\x81", "a",
                             "\xE2\x96\x81"
                             "a"}));
  w.set("tokenizer.ggml.token_type", Value::make_i32s({3, 3, 3, 1, 1, 1}));
  w.set("tokenizer.ggml.merges", Value::make_strings({"\xE2\x96\x81 a"}));
  w.set_u32("tokenizer.ggml.bos_token_id", 2);
  w.set_u32("tokenizer.ggml.eos_token_id", 1);
  w.set("tokenizer.ggml.add_bos_token", Value::make_bool(false));
  w.set("tokenizer.ggml.add_space_prefix", Value::make_bool(false));
  const Loaded l = parse(w);
  const Tokenizer t = Tokenizer::from_gguf(*l.file);
  EXPECT_EQ(t.type(), VocabType::kBpe);
  EXPECT_EQ(t.pre_tokenizer(), "gemma4");
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.encode("a a", true, false), (std::vector<int32_t>{2, 4, 5}));
  EXPECT_EQ(t.decode(t.encode("a a", true, false)), "a a");
  EXPECT_TRUE(t.is_eog(1));

  // Byte tokens of such a vocabulary must be spelled <0xNN>, as in SPM.
  w.set("tokenizer.ggml.token_type", Value::make_i32s({3, 3, 3, 1, 6, 1}));
  const Loaded bad = parse(w);
  try {
    Tokenizer::from_gguf(*bad.file);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.token_type[4]"), std::string::npos)
        << e.what();
  }
}

TEST(GgufVocab, NoBosMeansNoDefaultBos) {
  GgufWriter w;
  add_spm_keys(w);
  w.set_u32("tokenizer.ggml.bos_token_id", 0xFFFFFFFFu);
  const Loaded l = parse(w);
  const Tokenizer t = Tokenizer::from_gguf(*l.file);
  EXPECT_EQ(t.bos(), kNoToken);
  EXPECT_FALSE(t.add_bos());
  EXPECT_EQ(t.encode("a", true, false), t.encode("a", false, false));
}

TEST(GgufVocab, BadMetadataGivesOneClearError) {
  expect_error([](GgufWriter& w) { w.set_string("tokenizer.ggml.model", "bert"); },
               "tokenizer.ggml.model 'bert' is not supported");
  expect_error([](GgufWriter& w) { w.set_string("tokenizer.ggml.model", "gpt2"); },
               "tokenizer.ggml.merges");
  expect_error(
      [](GgufWriter& w) {
        w.set_string("tokenizer.ggml.model", "gpt2");
        w.set_string("tokenizer.ggml.pre", "mystery");
        w.set("tokenizer.ggml.merges", Value::make_strings({"a b"}));
      },
      "tokenizer.ggml.pre 'mystery'");
  expect_error(
      [](GgufWriter& w) {
        w.set("tokenizer.ggml.scores", Value::make_f32s({0, 0}));
      },
      "tokenizer.ggml.scores has 2 entries");
  expect_error(
      [](GgufWriter& w) {
        w.set("tokenizer.ggml.token_type", Value::make_i32s({2, 3, 3, 1, 1, 1}));
      },
      "tokenizer.ggml.token_type has 6 entries");
  expect_error(
      [](GgufWriter& w) {
        w.set("tokenizer.ggml.token_type", Value::make_i32s({2, 3, 3, 1, 1, 42, 1}));
      },
      "tokenizer.ggml.token_type[5] = 42");
  expect_error([](GgufWriter& w) { w.set_u32("tokenizer.ggml.eos_token_id", 7); },
               "tokenizer.ggml.eos_token_id = 7 is out of range");
  expect_error([](GgufWriter& w) { w.set_string("tokenizer.ggml.tokens", "not an array"); },
               "tokenizer.ggml.tokens");
  expect_error([](GgufWriter& w) { w.set("tokenizer.ggml.tokens", Value::make_strings({})); },
               "tokenizer.ggml.tokens is empty");
}

TEST(GgufVocab, FileWithoutTokenizer) {
  GgufWriter w;
  w.set_string("general.name", "no tokenizer");
  const Loaded l = parse(w);
  try {
    Tokenizer::from_gguf(*l.file);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mem.gguf: missing metadata key 'tokenizer.ggml.model'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tkv::tok
