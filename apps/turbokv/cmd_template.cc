// `turbokv template`: the exact prompt a chat template renders for a
// conversation, for checking a model's template or a --chat-template file.
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/flags.h"
#include "command_registry.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "output.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tkv::cli {
namespace {

// CONV.json: {"messages": [...], "tools": [...], "add_generation_prompt": B,
// any other variable}, or just the array of messages.
nlohmann::ordered_json read_conversation(const std::string& path) {
  const std::string text = read_input_file(path);
  nlohmann::ordered_json conv =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (conv.is_discarded()) fail(path, ": not valid JSON");
  if (conv.is_array()) conv = nlohmann::ordered_json{{"messages", std::move(conv)}};
  if (!conv.is_object())
    fail(path, ": expected an object with \"messages\" (or an array of messages)");
  if (!conv.contains("messages") || !conv["messages"].is_array())
    fail(path, ": \"messages\" must be an array of messages");
  if (!conv.contains("add_generation_prompt")) conv["add_generation_prompt"] = true;
  return conv;
}

int template_main(std::span<const std::string> args) {
  std::string model_path, template_option, conversation;
  FlagParser flags("template",
                   "turbokv template [-m MODEL] [--chat-template NAME|FILE] --messages CONV.json",
                   "Prints the prompt the chat template renders for a conversation, exactly\n"
                   "(no newline added). CONV.json holds \"messages\", optionally \"tools\",\n"
                   "\"add_generation_prompt\" (default true) and any other variable the template\n"
                   "reads (enable_thinking, ...); variables given there override the model's\n"
                   "(bos_token, eos_token). The template is the model's unless --chat-template\n"
                   "names another; without -m, --chat-template is required.");
  flags.add_string({"-m", "--model"}, "PATH", "GGUF file with a tokenizer (a model or a vocab)",
                   &model_path);
  flags.add_string({"--chat-template"}, "NAME|FILE",
                   "a built-in (chatml, llama3, phi3, gemma, mistral-v7, llama2) or a Jinja file",
                   &template_option);
  flags.add_string({"--messages"}, "FILE", "the conversation as JSON (- = standard input)",
                   &conversation);
  if (!flags.parse(args)) return 0;

  if (conversation.empty()) fail("template: no conversation given (use --messages CONV.json)");
  if (model_path.empty() && template_option.empty())
    fail("template: give a model (-m MODEL.gguf) or a template (--chat-template NAME|FILE)");
  const nlohmann::ordered_json conv = read_conversation(conversation);
  std::string prompt;
  if (model_path.empty()) {
    prompt = tok::ChatTemplate::from_option(template_option).render(conv);
  } else {
    // Only the tokenizer metadata is needed: vocabulary-only files work too.
    const gguf::GgufFile gguf = gguf::GgufFile::open(model_path);
    const tok::Tokenizer tokenizer = tok::Tokenizer::from_gguf(gguf);
    prompt = tok::ChatTemplate::for_tokenizer(tokenizer, template_option).render(conv);
  }
  write_stdout(prompt);
  return 0;
}

}  // namespace
}  // namespace tkv::cli

TKV_REGISTER_COMMAND(template, "print the prompt a chat template renders for a conversation",
                     tkv::cli::template_main);
