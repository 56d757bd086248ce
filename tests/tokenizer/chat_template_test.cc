// Chat templates: recognition from real Jinja templates, exact rendering of a
// multi-turn conversation with a system prompt for every family, stop tokens.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.h"
#include "fixtures.h"
#include "tokenizer/chat_template.h"

namespace tkv::tok::test {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "You are terse."},
    {"user", "Hi!"},
    {"assistant", "Hello."},
    {"user", "Sum 2+2?"},
};

std::string render(const std::string& name, bool add_generation_prompt = true) {
  return ChatTemplate::by_name(name).apply(kConversation, add_generation_prompt);
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(render("llama3"),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nSum 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // Contents are trimmed (the template's "| trim").
  EXPECT_EQ(ChatTemplate::by_name("llama3").apply({{"user", "  Hi!\n"}}, false),
            "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>");
}

TEST(ChatTemplate, Chatml) {
  EXPECT_EQ(render("chatml"),
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\nSum 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render("chatml", false) + "<|im_start|>assistant\n", render("chatml"));
}

TEST(ChatTemplate, Phi3) {
  EXPECT_EQ(render("phi3"),
            "<|system|>\nYou are terse.<|end|>\n<|user|>\nHi!<|end|>\n"
            "<|assistant|>\nHello.<|end|>\n<|user|>\nSum 2+2?<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplate, GemmaFoldsTheSystemPromptIntoTheFirstUserTurn) {
  EXPECT_EQ(render("gemma"),
            "<start_of_turn>user\nYou are terse.\n\nHi!<end_of_turn>\n"
            "<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nSum 2+2?<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(ChatTemplate, Llama2Variants) {
  EXPECT_EQ(render("llama2"),
            "[INST] You are terse.\nHi! [/INST]Hello.</s>[INST] Sum 2+2? [/INST]");
  EXPECT_EQ(
      render("llama2-sys"),
      "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi! [/INST]Hello.</s>[INST] Sum 2+2? [/INST]");
  EXPECT_EQ(render("llama2-sys-bos"),
            "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi! [/INST]Hello.</s><s>[INST] Sum 2+2? "
            "[/INST]");
  EXPECT_EQ(ChatTemplate::by_name("llama2-sys-strip").apply({{"user", " Hi! "}}, true),
            "[INST] Hi! [/INST]");
}

TEST(ChatTemplate, MistralVariants) {
  EXPECT_EQ(render("mistral-v1"),
            " [INST] You are terse.\n\nHi! [/INST] Hello.</s> [INST] Sum 2+2? [/INST]");
  EXPECT_EQ(render("mistral-v3"),
            "[INST] You are terse.\n\nHi![/INST] Hello.</s>[INST] Sum 2+2?[/INST]");
  EXPECT_EQ(render("mistral-v3-tekken"),
            "[INST]You are terse.\n\nHi![/INST]Hello.</s>[INST]Sum 2+2?[/INST]");
  EXPECT_EQ(render("mistral-v7"),
            "[SYSTEM_PROMPT] You are terse.[/SYSTEM_PROMPT][INST] Hi![/INST] Hello.</s>"
            "[INST] Sum 2+2?[/INST]");
  EXPECT_THROW(ChatTemplate::by_name("mistral-v3").apply({{"tool", "{}"}}, true), Error);
}

TEST(ChatTemplate, RecognizesRealTemplates) {
  struct Case {
    const char* tmpl;
    ChatFamily family;
  };
  const Case cases[] = {
      // Meta Llama 3 Instruct
      {"{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
       "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
       "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
       "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
       "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}",
       ChatFamily::kLlama3},
      // Google Gemma
      {"{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'assistant') %}{% "
       "set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ "
       "'<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% "
       "endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}",
       ChatFamily::kGemma},
      // Mistral 7B Instruct v0.2
      {"{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' "
       "+ message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
       "message['content'] + eos_token}}{% endif %}{% endfor %}",
       ChatFamily::kLlama2},
      // Meta Llama 2 chat
      {"{% if messages[0]['role'] == 'system' %}{% set system_message = messages[0]['content'] "
       "%}{% endif %}{% for message in loop_messages %}{% if loop.index0 == 0 and system_message "
       "!= false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + "
       "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' "
       "+ content.strip() + ' [/INST]' }}{% endif %}{% endfor %}",
       ChatFamily::kLlama2SysStrip},
      // Mistral v3 (tools) and v7
      {"{%- if tools %}[AVAILABLE_TOOLS]{%- endif %}{{- '[INST] ' + message['content'] + "
       "'[/INST]' }}",
       ChatFamily::kMistralV3},
      {"{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}{{- '[INST]' + "
       "message['content'] + '[/INST]' }}",
       ChatFamily::kMistralV7},
  };
  for (const Case& c : cases) {
    const ChatTemplate t = ChatTemplate::detect(c.tmpl);
    EXPECT_EQ(t.family(), c.family) << c.tmpl;
    EXPECT_TRUE(t.warning().empty());
  }
}

TEST(ChatTemplate, FromTheSharedVocabularies) {
  TKV_REQUIRE_TOKENIZER(phi3, "vocab/ggml-vocab-phi-3.gguf");
  EXPECT_EQ(ChatTemplate::for_tokenizer(*phi3).family(), ChatFamily::kPhi3);

  TKV_REQUIRE_TOKENIZER(qwen2, "vocab/ggml-vocab-qwen2.gguf");
  const ChatTemplate qwen = ChatTemplate::for_tokenizer(*qwen2);
  EXPECT_EQ(qwen.family(), ChatFamily::kChatml);
  // Qwen's template supplies a system prompt when the conversation has none.
  EXPECT_EQ(qwen.default_system_prompt(), "You are a helpful assistant");
  EXPECT_EQ(qwen.apply({{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(qwen.apply({{"system", "S"}, {"user", "Hi"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  // The override wins over the file's template.
  EXPECT_EQ(ChatTemplate::for_tokenizer(*qwen2, "llama3").family(), ChatFamily::kLlama3);
}

TEST(ChatTemplate, UnknownTemplatesFallBackToChatmlWithAWarning) {
  const ChatTemplate empty = ChatTemplate::detect("");
  EXPECT_EQ(empty.family(), ChatFamily::kChatml);
  EXPECT_NE(empty.warning().find("no chat template"), std::string::npos);
  const ChatTemplate odd =
      ChatTemplate::detect("{% for m in messages %}{{ m.content }}{% endfor %}");
  EXPECT_EQ(odd.family(), ChatFamily::kChatml);
  EXPECT_FALSE(odd.warning().empty());
  EXPECT_EQ(ChatTemplate::detect("gemma").family(), ChatFamily::kGemma);  // a bare name works too
}

TEST(ChatTemplate, ErrorsQuoteBytesEscaped) {
  // A role or template name from a file or a client may hold any bytes:
  // the message shows them escaped, on one line.
  const ChatTemplate mistral = ChatTemplate::by_name("mistral-v7");
  try {
    mistral.apply({{"to\x01ol\n\xff", "x"}}, true);
    ADD_FAILURE() << "no error for an unknown role";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'to\\x01ol\\n\\xff'"), std::string::npos) << e.what();
  }
  try {
    ChatTemplate::by_name("bad\nname\x80");
    ADD_FAILURE() << "no error for an unknown name";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'bad\\nname\\x80'"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, NamesAndAliases) {
  for (const std::string& n : ChatTemplate::names()) EXPECT_EQ(ChatTemplate::by_name(n).name(), n);
  EXPECT_EQ(ChatTemplate::by_name("qwen").family(), ChatFamily::kChatml);
  EXPECT_EQ(ChatTemplate::by_name("llama-3").family(), ChatFamily::kLlama3);
  EXPECT_EQ(ChatTemplate::by_name("phi-3").family(), ChatFamily::kPhi3);
  try {
    ChatTemplate::by_name("vicuna");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown chat template 'vicuna'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("llama3"), std::string::npos);
  }
}

TEST(ChatTemplate, StopTokensAndEncoding) {
  TKV_REQUIRE_TOKENIZER(tok, "vocab/ggml-vocab-llama-bpe.gguf");
  const ChatTemplate t = ChatTemplate::by_name("llama3");
  const std::vector<int32_t> stops = t.stop_tokens(*tok);
  for (int32_t id : {128001, 128009}) {
    EXPECT_TRUE(std::find(stops.begin(), stops.end(), id) != stops.end()) << id;
  }
  EXPECT_TRUE(std::is_sorted(stops.begin(), stops.end()));
  // The rendered prompt, encoded with BOS and special-token parsing, starts
  // <|begin_of_text|><|start_header_id|> and ends with the assistant header.
  const std::vector<int32_t> ids = tok->encode(t.apply(kConversation, true), true, true);
  ASSERT_GT(ids.size(), 4u);
  EXPECT_EQ(ids[0], 128000);
  EXPECT_EQ(ids[1], 128006);
  EXPECT_EQ(ids[ids.size() - 2], 128007);  // <|end_header_id|>
  EXPECT_EQ(tok->decode(std::vector<int32_t>{ids.back()}), "\n\n");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 128009), 4);
}

}  // namespace
}  // namespace tkv::tok::test
