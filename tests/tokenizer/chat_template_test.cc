// Chat templates: the built-in formats render a multi-turn conversation with
// a system prompt exactly; a model's own template (tokenizer.chat_template)
// is executed, its BOS left to the tokenizer; overrides by name or file; stop
// tokens; a model without a template asks for --chat-template.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "common/error.h"
#include "common/test_util.h"
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

TEST(ChatTemplate, Llama2) {
  EXPECT_EQ(
      render("llama2"),
      "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi! [/INST]Hello.</s>[INST] Sum 2+2? [/INST]");
}

TEST(ChatTemplate, MistralV7) {
  EXPECT_EQ(render("mistral-v7"),
            "[SYSTEM_PROMPT] You are terse.[/SYSTEM_PROMPT][INST] Hi![/INST] Hello.</s>"
            "[INST] Sum 2+2?[/INST]");
  EXPECT_THROW(ChatTemplate::by_name("mistral-v7").apply({{"tool", "{}"}}, true), Error);
}

TEST(ChatTemplate, FromTheSharedVocabularies) {
  TKV_REQUIRE_TOKENIZER(phi3, "vocab/ggml-vocab-phi-3.gguf");
  // Phi-3's own template: no system turn, BOS written by the template and
  // left to the tokenizer (which adds it).
  const ChatTemplate phi = ChatTemplate::for_tokenizer(*phi3);
  EXPECT_EQ(phi.name(), "model");
  EXPECT_EQ(phi.apply(kConversation, true),
            "<|user|>\nHi!<|end|>\n<|assistant|>\nHello.<|end|>\n<|user|>\nSum "
            "2+2?<|end|>\n<|assistant|>\n");
  EXPECT_EQ(phi.render({{"messages", {{{"role", "user"}, {"content", "x"}}}}}),
            "<s><|user|>\nx<|end|>\n<|assistant|>\n");
  const std::vector<int32_t> stops = phi.stop_tokens(*phi3);
  EXPECT_TRUE(std::find(stops.begin(), stops.end(), phi3->find_token("<|end|>")) != stops.end());

  TKV_REQUIRE_TOKENIZER(qwen2, "vocab/ggml-vocab-qwen2.gguf");
  const ChatTemplate qwen = ChatTemplate::for_tokenizer(*qwen2);
  // Qwen's template supplies a system prompt when the conversation has none.
  EXPECT_EQ(qwen.apply({{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(qwen.apply({{"system", "S"}, {"user", "Hi"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(qwen.stop_strings(), std::vector<std::string>{"<|im_end|>"});
  // The override wins over the file's template.
  EXPECT_EQ(ChatTemplate::for_tokenizer(*qwen2, "llama3").name(), "llama3");
}

TEST(ChatTemplate, AModelWithoutATemplateNeedsAnOverride) {
  TKV_REQUIRE_TOKENIZER(tok, "vocab/ggml-vocab-llama-bpe.gguf");
  EXPECT_FALSE(ChatTemplate::of_model(*tok).has_value());
  try {
    ChatTemplate::for_tokenizer(*tok);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pass --chat-template"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ChatTemplate::for_tokenizer(*tok, "chatml").name(), "chatml");
}

TEST(ChatTemplate, FileOverrideIsParsedWithLineNumbers) {
  const std::string dir = tkv::test::temp_dir();
  const std::string good = dir + "/good.jinja", bad = dir + "/bad.jinja";
  std::ofstream(good)
      << "{% for m in messages %}<{{ m.role }}>{{ m.content | upper }}{% endfor %}\n";
  std::ofstream(bad) << "ok\n{% for m in messages %}\n{{ m.content }}\n";
  const ChatTemplate t = ChatTemplate::from_option(good);
  EXPECT_EQ(t.name(), good);
  EXPECT_EQ(t.apply({{"user", "hi"}}, true), "<user>HI");
  try {
    ChatTemplate::from_option(bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "chat template " + bad +
                  " line 3: unexpected end of template, expected 'else' or 'endfor'");
  }
}

TEST(ChatTemplate, ExtraVariablesReachTheTemplate) {
  const ChatTemplate t = ChatTemplate::from_source(
      "{{ messages[0].content }}{% if enable_thinking is defined and not enable_thinking "
      "%}/no_think{% endif %}"
      "{% if add_generation_prompt %}!{% endif %}",
      "kwargs");
  EXPECT_EQ(t.apply({{"user", "q"}}, true), "q!");
  EXPECT_EQ(t.apply({{"user", "q"}}, true, {{"enable_thinking", false}}), "q/no_think!");
  // Given variables override: add_generation_prompt from the extras wins.
  EXPECT_EQ(t.apply({{"user", "q"}}, true, {{"add_generation_prompt", false}}), "q");
}

TEST(ChatTemplate, ErrorsQuoteBytesEscaped) {
  // A role or template name from a file or a client may hold any bytes:
  // the message shows them escaped, on one line.
  try {
    ChatTemplate::by_name("bad\nname\x80");
    ADD_FAILURE() << "no error for an unknown name";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'bad\\nname\\x80'"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, NamesAndAliases) {
  for (const std::string& n : ChatTemplate::names()) EXPECT_EQ(ChatTemplate::by_name(n).name(), n);
  EXPECT_EQ(ChatTemplate::by_name("qwen").name(), "chatml");
  EXPECT_EQ(ChatTemplate::by_name("llama-3").name(), "llama3");
  EXPECT_EQ(ChatTemplate::by_name("phi-3").name(), "phi3");
  EXPECT_EQ(ChatTemplate::from_option("qwen").name(), "chatml");
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
  const ChatTemplate t = ChatTemplate::for_tokenizer(*tok, "llama3");
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
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 128000), 1);  // the template's BOS is not doubled
  EXPECT_EQ(t.render({{"messages", nlohmann::ordered_json::array()}}), "<|begin_of_text|>");
}

}  // namespace
}  // namespace tkv::tok::test

namespace tkv::tok::test {
namespace {

// Tool-call arguments come as JSON text (OpenAI's form). Templates that
// read them as an object (Qwen3.5) get the object, templates that only take
// text (Qwen3) get the text: each renders as Hugging Face renders the
// conversation in the form it accepts.
TEST(ChatTemplate, ToolCallArgumentsInTheFormTheTemplateTakes) {
  const std::string dir = ::tkv::test::shared_dir() + "/templates";
  auto read = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  if (read(dir + "/cases/conversations.json").empty())
    TKV_MISSING_FIXTURE << "chat-template fixtures not found in " << dir;
  const auto cases =
      nlohmann::ordered_json::parse(read(dir + "/cases/conversations.json"))["cases"];
  nlohmann::ordered_json conversation;
  for (const auto& c : cases)
    if (c["id"] == "05b-tool-call-args-string") conversation = c;
  ASSERT_FALSE(conversation.is_null());
  std::vector<ChatMessage> messages;
  for (const auto& m : conversation["messages"]) {
    ChatMessage message;
    message.role = m["role"];
    message.content = m["content"].is_string() ? m["content"].get<std::string>() : "";
    for (const char* key : {"tool_calls", "tool_call_id"})
      if (m.contains(key)) message.fields[key] = m[key];
    messages.push_back(std::move(message));
  }
  const nlohmann::ordered_json extra = {{"tools", conversation["tools"]}};
  for (const auto& [stem, expected] : {std::pair{"Qwen3.5-4B", "05a-tool-call-args-object"},
                                       std::pair{"Qwen-Qwen3-0.6B", "05b-tool-call-args-string"}}) {
    SCOPED_TRACE(stem);
    const ChatTemplate t =
        ChatTemplate::from_source(read(dir + "/templates/" + stem + ".jinja"), stem);
    EXPECT_EQ(t.apply(messages, true, extra),
              read(dir + "/expected/" + stem + "/" + expected + ".txt"));
  }
}

}  // namespace
}  // namespace tkv::tok::test
