#include "tokenizer/chat_template.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/escape.h"
#include "tokenizer/tokenizer.h"

namespace tkv::tok {

namespace {

struct BuiltIn {
  const char* name;
  const char* source;
};

// Small formats for models without a template of their own (or to try
// another). Each renders what the family's own template renders for plain
// system / user / assistant turns, BOS included where the family writes it.
constexpr BuiltIn kBuiltIns[] = {
    {"chatml",
     "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
     "message['content'] + "
     "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
     "}}{% endif %}"},
    {"llama3",
     "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
     "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% "
     "endif %}"},
    {"phi3",
     "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + "
     "'<|end|>\\n' }}"
     "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"},
    {"gemma",
     "{{ bos_token }}{% set ns = namespace(system='') %}{% for message in messages %}"
     "{% if message['role'] == 'system' %}{% set ns.system = message['content'] | trim %}{% else %}"
     "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
     "{{ '<start_of_turn>' + role + '\\n' }}{% if ns.system and role != 'model' %}"
     "{{ ns.system + '\\n\\n' }}{% set ns.system = '' %}{% endif %}"
     "{{ message['content'] | trim + '<end_of_turn>\\n' }}{% endif %}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"},
    {"mistral-v7",
     "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}"
     "{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}"
     "{% elif message['role'] == 'user' %}{{ '[INST] ' + message['content'] + '[/INST]' }}"
     "{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + '</s>' }}"
     "{% else %}{{ raise_exception('Only system, user and assistant roles are supported') }}{% "
     "endif %}"
     "{% endfor %}"},
    {"llama2",
     "{{ bos_token }}{% set ns = namespace(system='') %}{% for message in messages %}"
     "{% if message['role'] == 'system' %}{% set ns.system = '<<SYS>>\\n' + message['content'] + "
     "'\\n<</SYS>>\\n\\n' %}"
     "{% elif message['role'] == 'user' %}{{ '[INST] ' + ns.system + message['content'] + ' "
     "[/INST]' }}"
     "{% set ns.system = '' %}{% elif message['role'] == 'assistant' %}{{ message['content'] + "
     "'</s>' }}"
     "{% else %}{{ raise_exception('Only system, user and assistant roles are supported') }}{% "
     "endif %}{% endfor %}"},
};

constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
    {"qwen", "chatml"},
    {"llama-3", "llama3"},
    {"phi-3", "phi3"},
};

// Markers that end a turn, looked for in the template's source. "<|end|>"
// ends a turn (phi3) unless the format also has "<|return|>", where it only
// ends one channel of the assistant's message (gpt-oss).
constexpr std::string_view kTurnEnds[] = {
    "<|im_end|>",     "<|eot_id|>",    "<|eom_id|>", "<|end_of_text|>",
    "<end_of_turn>",  "<turn|>",       "<|return|>", "<|call|>",
    "<|end|>",        "<|endoftext|>", "</s>",       "<｜end▁of▁sentence｜>",
    "<|end_of_role|>"};

std::vector<std::string> turn_ends(std::string_view source) {
  std::vector<std::string> out;
  const bool channels = source.find("<|return|>") != std::string_view::npos;
  for (std::string_view m : kTurnEnds) {
    if (m == "<|end_of_role|>") continue;  // ends a role header, not a turn
    if (m == "<|end|>" && channels) continue;
    if (source.find(m) != std::string_view::npos) out.emplace_back(m);
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("chat template file ", escape_bytes(path), ": cannot be read");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

ChatTemplate::ChatTemplate(std::shared_ptr<const tmpl::Template> program, std::string name)
    : program_(std::move(program)),
      name_(std::move(name)),
      stop_strings_(turn_ends(program_->source())) {}

ChatTemplate ChatTemplate::from_source(std::string_view source, std::string name) {
  auto program = std::make_shared<const tmpl::Template>(tmpl::Template::parse(source, name));
  return ChatTemplate(std::move(program), std::move(name));
}

std::vector<std::string> ChatTemplate::names() {
  std::vector<std::string> n;
  for (const BuiltIn& b : kBuiltIns) n.emplace_back(b.name);
  return n;
}

ChatTemplate ChatTemplate::by_name(std::string_view name) {
  for (const auto& [alias, target] : kAliases)
    if (name == alias) name = target;
  for (const BuiltIn& b : kBuiltIns) {
    if (name == b.name) {
      ChatTemplate t = from_source(b.source, b.name);
      if (name == "chatml") t.stop_strings_.push_back("<|endoftext|>");
      if (name == "llama3")
        t.stop_strings_.insert(t.stop_strings_.end(), {"<|eom_id|>", "<|end_of_text|>"});
      return t;
    }
  }
  std::string all;
  for (const std::string& n : names()) all += (all.empty() ? "" : ", ") + n;
  fail("unknown chat template '", escape_bytes(name), "' (built-in: ", all,
       "; or the path of a Jinja file)");
}

ChatTemplate ChatTemplate::from_option(std::string_view name_or_file) {
  for (const BuiltIn& b : kBuiltIns)
    if (name_or_file == b.name) return by_name(name_or_file);
  for (const auto& [alias, target] : kAliases)
    if (name_or_file == alias) return by_name(name_or_file);
  const std::string path(name_or_file);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return by_name(name_or_file);  // the error lists the names
  return from_source(read_file(path), path);
}

std::optional<ChatTemplate> ChatTemplate::of_model(const Tokenizer& tokenizer) {
  if (tokenizer.chat_template().empty()) return std::nullopt;
  std::optional<ChatTemplate> parsed;
  try {
    parsed = from_source(tokenizer.chat_template(), "model");
  } catch (const tmpl::TemplateError& e) {
    fail("the model's chat template (tokenizer.chat_template) line ", e.line(), ": ",
         escape_bytes(e.reason()), " (pass --chat-template NAME|FILE to use another)");
  }
  ChatTemplate& t = *parsed;
  t.bind(tokenizer);
  return t;
}

ChatTemplate ChatTemplate::for_tokenizer(const Tokenizer& tokenizer,
                                         std::string_view override_option) {
  if (!override_option.empty()) {
    ChatTemplate t = from_option(override_option);
    t.bind(tokenizer);
    return t;
  }
  std::optional<ChatTemplate> t = of_model(tokenizer);
  if (!t)
    fail(
        "the model has no chat template (tokenizer.chat_template); pass --chat-template NAME|FILE "
        "(built-in: ",
        [] {
          std::string all;
          for (const std::string& n : names()) all += (all.empty() ? "" : ", ") + n;
          return all;
        }(),
        ")");
  return *t;
}

void ChatTemplate::bind(const Tokenizer& tokenizer) {
  auto text = [&](int32_t id) { return id == kNoToken ? std::string() : tokenizer.token_text(id); };
  bos_text_ = text(tokenizer.bos());
  eos_text_ = text(tokenizer.eos());
  strip_bos_ = tokenizer.add_bos() && !bos_text_.empty();
  if (!eos_text_.empty() &&
      std::find(stop_strings_.begin(), stop_strings_.end(), eos_text_) == stop_strings_.end() &&
      program_->source().find("eos_token") != std::string::npos)
    stop_strings_.push_back(eos_text_);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& variables) const {
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  vars["bos_token"] = bos_text_;
  vars["eos_token"] = eos_text_;
  if (variables.is_object())
    for (const auto& [k, v] : variables.items()) vars[k] = v;
  return program_->render(vars);
}

namespace {

// The messages as the template sees them; `arguments_as_objects`: tool-call
// arguments that parse as a JSON object are given as that object.
nlohmann::ordered_json message_list(const std::vector<ChatMessage>& messages,
                                    bool arguments_as_objects) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) {
    nlohmann::ordered_json item = {{"role", m.role}, {"content", m.content}};
    for (const auto& [k, v] : m.fields.items()) item[k] = v;
    if (arguments_as_objects && item.contains("tool_calls") && item["tool_calls"].is_array())
      for (auto& call : item["tool_calls"]) {
        if (!call.is_object() || !call.contains("function")) continue;
        nlohmann::ordered_json& args = call["function"]["arguments"];
        if (!args.is_string()) continue;
        nlohmann::ordered_json parsed =
            nlohmann::ordered_json::parse(args.get<std::string>(), nullptr, false);
        if (parsed.is_object()) args = std::move(parsed);
      }
    list.push_back(std::move(item));
  }
  return list;
}

bool has_tool_calls(const std::vector<ChatMessage>& messages) {
  return std::any_of(messages.begin(), messages.end(),
                     [](const ChatMessage& m) { return m.fields.contains("tool_calls"); });
}

}  // namespace

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt,
                                const nlohmann::ordered_json& extra) const {
  std::string out = render_chat(messages, add_generation_prompt, extra);
  if (strip_bos_ && out.compare(0, bos_text_.size(), bos_text_) == 0)
    out.erase(0, bos_text_.size());
  return out;
}

std::string ChatTemplate::render_chat(const std::vector<ChatMessage>& messages,
                                      bool add_generation_prompt,
                                      const nlohmann::ordered_json& extra) const {
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  vars["messages"] = message_list(messages, /*arguments_as_objects=*/true);
  vars["add_generation_prompt"] = add_generation_prompt;
  if (extra.is_object())
    for (const auto& [k, v] : extra.items()) vars[k] = v;
  std::string out;
  try {
    out = render(vars);
  } catch (const Error&) {
    if (!has_tool_calls(messages)) throw;
    vars["messages"] = message_list(messages, /*arguments_as_objects=*/false);
    out = render(vars);
  }
  return out;
}

std::vector<int32_t> ChatTemplate::stop_tokens(const Tokenizer& tokenizer) const {
  std::vector<int32_t> ids = tokenizer.eog_ids();
  for (const std::string& s : stop_strings_) {
    if (const int32_t id = tokenizer.find_token(s); id != kNoToken) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace tkv::tok
