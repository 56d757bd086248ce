// Chat prompt formats. A GGUF carries its format as a Jinja template
// (tokenizer.chat_template); it is parsed when the model loads and executed
// by the template interpreter (src/template) with the variables Hugging
// Face's apply_chat_template passes: messages, tools (when given),
// add_generation_prompt, bos_token and eos_token (the vocabulary's), and
// any extra keyword variables (enable_thinking, ...), which override them.
//
// A few formats are built in, by name (chatml, llama3, ...), as small Jinja
// sources; --chat-template NAME|FILE picks one or a .jinja file instead of
// the model's. A model without a template has no chat format: for_tokenizer
// fails unless an override is given.
//
// apply() returns the prompt without the leading BOS text the template
// writes when the tokenizer adds BOS itself: encode it with BOS as the
// vocabulary asks and parse_special = true (markers become control tokens).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "template/template.h"

namespace tkv::tok {

class Tokenizer;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ... (the template decides what it accepts)
  std::string content;
  // More keys of the message as the template sees them (tool_calls,
  // tool_call_id, name, reasoning_content; "content": null for an
  // assistant turn that only calls tools). Empty for plain messages.
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
};

class ChatTemplate {
 public:
  // Parses Jinja source; a syntax error is a tkv::Error naming `name`, the
  // line and the reason.
  static ChatTemplate from_source(std::string_view source, std::string name);
  // A built-in format: chatml, llama3, phi3, gemma, mistral-v7, llama2
  // (aliases: qwen, llama-3, phi-3). Unknown name: tkv::Error listing them.
  static ChatTemplate by_name(std::string_view name);
  // --chat-template's value: a built-in name, else the path of a Jinja file.
  static ChatTemplate from_option(std::string_view name_or_file);
  // The model's template (tokenizer.chat_template), bound to the tokenizer;
  // nullopt when the file has none.
  static std::optional<ChatTemplate> of_model(const Tokenizer& tokenizer);
  // `override_option` (from_option) when not empty, else the model's;
  // bound to the tokenizer. Neither: a tkv::Error saying to pass
  // --chat-template.
  static ChatTemplate for_tokenizer(const Tokenizer& tokenizer,
                                    std::string_view override_option = {});
  static std::vector<std::string> names();

  // Takes bos_token / eos_token from the vocabulary, and the BOS to leave
  // out of apply()'s text when the tokenizer adds it.
  void bind(const Tokenizer& tokenizer);

  // "chatml", ... for built-ins, "model" for the GGUF's, the path for a file.
  const std::string& name() const { return name_; }
  const std::string& source() const { return program_->source(); }

  // The exact rendering of `variables` (a JSON object: messages, tools,
  // add_generation_prompt, any other variable); bos_token and eos_token are
  // the bound tokenizer's unless given. tkv::Error when the template fails
  // (raise_exception's message, or the error and its line).
  std::string render(const nlohmann::ordered_json& variables) const;
  // The conversation's prompt, without the leading BOS text (see above);
  // `extra`: more variables (enable_thinking, tools, ...). Tool-call
  // arguments are sent as JSON text (OpenAI's form) but most templates
  // expect an object (they write `arguments | tojson` or iterate over it):
  // they are rendered as objects where they parse as one, and when the
  // template fails on that, rendered again as the text they were (the
  // templates of Qwen3, gpt-oss and Phi-3.5 take only text).
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                    const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;
  // The same rendering with the BOS text left in (what the template
  // writes: `turbokv template`, POST /apply-template).
  std::string render_chat(
      const std::vector<ChatMessage>& messages, bool add_generation_prompt,
      const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  // Texts that end an assistant turn in this format ("<|eot_id|>", ...):
  // the end-of-turn markers the template writes, and the EOS text.
  const std::vector<std::string>& stop_strings() const { return stop_strings_; }
  // The stop strings that are single tokens of `tokenizer`, plus its
  // end-of-generation tokens; sorted, unique.
  std::vector<int32_t> stop_tokens(const Tokenizer& tokenizer) const;

 private:
  ChatTemplate(std::shared_ptr<const tmpl::Template> program, std::string name);
  std::shared_ptr<const tmpl::Template> program_;
  std::string name_;
  std::string bos_text_;
  std::string eos_text_;
  bool strip_bos_ = false;
  std::vector<std::string> stop_strings_;
};

}  // namespace tkv::tok
