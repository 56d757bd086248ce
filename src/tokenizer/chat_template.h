// Chat prompt formats. GGUF files carry their format as a Jinja template
// (tokenizer.chat_template); instead of evaluating Jinja we recognize the
// family by its distinctive markers, as llama.cpp's llm_chat_detect_template
// does, and render it in C++ (same output as llama.cpp's
// llm_chat_apply_template for these families):
//
//   llama3            <|start_header_id|>ROLE<|end_header_id|>\n\nTEXT<|eot_id|>
//   chatml (Qwen)     <|im_start|>ROLE\nTEXT<|im_end|>\n
//   llama2 variants   [INST] <<SYS>>\nSYS\n<</SYS>>\n\nUSER [/INST]ANSWER</s>
//   mistral-v1/v3/v3-tekken/v7   [INST] / [SYSTEM_PROMPT] layouts
//   gemma             <start_of_turn>user\nTEXT<end_of_turn>\n  (assistant is "model")
//   phi3              <|ROLE|>\nTEXT<|end|>\n
//
// The rendered prompt does not contain the BOS token: encode it with
// add_special = true (BOS as the vocabulary asks) and parse_special = true
// (so the markers become their control tokens).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tkv::gguf {
class GgufFile;
}

namespace tkv::tok {

class Tokenizer;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (some formats accept others)
  std::string content;
};

enum class ChatFamily {
  kChatml,
  kLlama2,
  kLlama2Sys,
  kLlama2SysBos,
  kLlama2SysStrip,
  kMistralV1,
  kMistralV3,
  kMistralV3Tekken,
  kMistralV7,
  kLlama3,
  kGemma,
  kPhi3,
};

class ChatTemplate {
 public:
  // Recognizes the family from template text. Empty or unrecognized text
  // gives chatml, with warning() saying so. The text may also be a family
  // name (as llama.cpp accepts).
  static ChatTemplate detect(std::string_view template_text);
  // By name: chatml, llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip,
  // mistral-v1, mistral-v3, mistral-v3-tekken, mistral-v7, llama3, gemma,
  // phi3 (aliases: qwen, llama-3, phi-3, llama-2, mistral = mistral-v3).
  // Unknown name: tkv::Error listing the names.
  static ChatTemplate by_name(std::string_view name);
  // The tokenizer's chat template, or `override_name` when not empty.
  static ChatTemplate for_tokenizer(const Tokenizer& tokenizer,
                                    std::string_view override_name = {});
  static std::vector<std::string> names();

  ChatFamily family() const { return family_; }
  const std::string& name() const { return name_; }
  // Non-empty when detection fell back to chatml; meant for the user.
  const std::string& warning() const { return warning_; }
  // chatml templates that insert a system prompt when the conversation has
  // none (Qwen: "You are a helpful assistant"); "" otherwise.
  const std::string& default_system_prompt() const { return default_system_; }

  // Renders the conversation; add_generation_prompt appends the header of
  // the assistant's next turn. Roles a format cannot express are a tkv::Error.
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  // Texts that end an assistant turn in this format ("<|eot_id|>", ...).
  const std::vector<std::string>& stop_strings() const { return stop_strings_; }
  // The stop strings that are single tokens of `tokenizer`, plus its
  // end-of-generation tokens; sorted, unique.
  std::vector<int32_t> stop_tokens(const Tokenizer& tokenizer) const;

 private:
  explicit ChatTemplate(ChatFamily family);
  ChatFamily family_;
  std::string name_;
  std::string warning_;
  std::string default_system_;
  std::vector<std::string> stop_strings_;
};

}  // namespace tkv::tok
