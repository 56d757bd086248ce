#include "tokenizer/chat_template.h"

#include <algorithm>

#include "common/error.h"
#include "common/escape.h"
#include "tokenizer/tokenizer.h"

namespace tkv::tok {

namespace {

struct FamilyInfo {
  ChatFamily family;
  const char* name;
  std::vector<std::string> stops;
};

const std::vector<FamilyInfo>& families() {
  static const std::vector<FamilyInfo> f = {
      {ChatFamily::kChatml, "chatml", {"<|im_end|>", "<|endoftext|>"}},
      {ChatFamily::kLlama2, "llama2", {"</s>"}},
      {ChatFamily::kLlama2Sys, "llama2-sys", {"</s>"}},
      {ChatFamily::kLlama2SysBos, "llama2-sys-bos", {"</s>"}},
      {ChatFamily::kLlama2SysStrip, "llama2-sys-strip", {"</s>"}},
      {ChatFamily::kMistralV1, "mistral-v1", {"</s>"}},
      {ChatFamily::kMistralV3, "mistral-v3", {"</s>"}},
      {ChatFamily::kMistralV3Tekken, "mistral-v3-tekken", {"</s>"}},
      {ChatFamily::kMistralV7, "mistral-v7", {"</s>"}},
      {ChatFamily::kLlama3, "llama3", {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"}},
      {ChatFamily::kGemma, "gemma", {"<end_of_turn>", "<eos>"}},
      {ChatFamily::kPhi3, "phi3", {"<|end|>", "<|endoftext|>"}},
  };
  return f;
}

const FamilyInfo& info(ChatFamily family) {
  for (const FamilyInfo& f : families())
    if (f.family == family) return f;
  TKV_CHECK(false);
  return families()[0];
}

constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
    {"qwen", "chatml"},    {"llama-3", "llama3"},     {"phi-3", "phi3"},
    {"llama-2", "llama2"}, {"mistral", "mistral-v3"},
};

// ASCII whitespace trim, as llama.cpp's trim() (and Jinja's |trim on ASCII).
std::string trim(std::string_view s) {
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
  };
  size_t b = 0, e = s.size();
  while (b < e && space(s[b])) ++b;
  while (e > b && space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

// Finds a literal default system prompt in a chatml template, e.g. Qwen's
//   '<|im_start|>system\nYou are a helpful assistant<|im_end|>\n'
// The newline may be a real one or Jinja's "\n" escape. Blocks whose text
// holds template syntax (quotes, braces, %) are template logic, not a
// literal prompt, and are skipped.
std::string find_default_system_prompt(std::string_view tmpl) {
  static constexpr std::string_view kOpen = "<|im_start|>system";
  static constexpr std::string_view kClose = "<|im_end|>";
  for (size_t at = tmpl.find(kOpen); at != std::string_view::npos; at = tmpl.find(kOpen, at + 1)) {
    size_t p = at + kOpen.size();
    if (tmpl.substr(p, 1) == "\n") {
      p += 1;
    } else if (tmpl.substr(p, 2) == "\\n") {
      p += 2;
    } else {
      continue;
    }
    const size_t end = tmpl.find(kClose, p);
    if (end == std::string_view::npos) continue;
    const std::string_view body = tmpl.substr(p, end - p);
    if (body.empty() || body.find_first_of("'\"{}%") != std::string_view::npos) continue;
    std::string text;
    for (size_t i = 0; i < body.size(); ++i) {
      if (body[i] == '\\' && i + 1 < body.size() && body[i + 1] == 'n') {
        text += '\n';
        ++i;
      } else {
        text += body[i];
      }
    }
    return text;
  }
  return {};
}

ChatFamily detect_family(std::string_view t, bool* recognized) {
  *recognized = true;
  if (contains(t, "<|im_start|>")) return ChatFamily::kChatml;
  if (t.rfind("mistral", 0) == 0 || contains(t, "[INST]")) {
    if (contains(t, "[SYSTEM_PROMPT]")) return ChatFamily::kMistralV7;
    // The official Mistral v1 / v3 / v3-tekken templates.
    if (contains(t, "' [INST] ' + system_message") || contains(t, "[AVAILABLE_TOOLS]")) {
      if (contains(t, " [INST]")) return ChatFamily::kMistralV1;
      if (contains(t, "\"[INST]\"")) return ChatFamily::kMistralV3Tekken;
      return ChatFamily::kMistralV3;
    }
    if (contains(t, "content.strip()")) return ChatFamily::kLlama2SysStrip;
    if (contains(t, "bos_token + '[INST]")) return ChatFamily::kLlama2SysBos;
    if (contains(t, "<<SYS>>")) return ChatFamily::kLlama2Sys;
    return ChatFamily::kLlama2;
  }
  if (contains(t, "<|assistant|>") && contains(t, "<|end|>")) return ChatFamily::kPhi3;
  if (contains(t, "<start_of_turn>")) return ChatFamily::kGemma;
  if (contains(t, "<|start_header_id|>") && contains(t, "<|end_header_id|>")) {
    return ChatFamily::kLlama3;
  }
  *recognized = false;
  return ChatFamily::kChatml;
}

void require_basic_role(const ChatTemplate& t, const std::string& role) {
  if (role != "system" && role != "user" && role != "assistant") {
    fail("chat template ", t.name(), ": role '", escape_bytes(role),
         "' cannot be expressed (only system, user and assistant)");
  }
}

}  // namespace

ChatTemplate::ChatTemplate(ChatFamily family)
    : family_(family), name_(info(family).name), stop_strings_(info(family).stops) {}

std::vector<std::string> ChatTemplate::names() {
  std::vector<std::string> n;
  for (const FamilyInfo& f : families()) n.emplace_back(f.name);
  return n;
}

ChatTemplate ChatTemplate::by_name(std::string_view name) {
  for (const auto& [alias, target] : kAliases) {
    if (name == alias) name = target;
  }
  for (const FamilyInfo& f : families()) {
    if (name == f.name) return ChatTemplate(f.family);
  }
  std::string all;
  for (const std::string& n : names()) {
    if (!all.empty()) all += ", ";
    all += n;
  }
  fail("unknown chat template '", escape_bytes(name), "' (known: ", all, ")");
}

ChatTemplate ChatTemplate::detect(std::string_view template_text) {
  for (const FamilyInfo& f : families()) {
    if (template_text == f.name) return ChatTemplate(f.family);
  }
  bool recognized = false;
  ChatTemplate t(detect_family(template_text, &recognized));
  if (!recognized) {
    t.warning_ = template_text.empty()
                     ? "the model has no chat template (tokenizer.chat_template); using chatml"
                     : "the model's chat template is not one turbokv recognizes; using chatml "
                       "(choose another with the chat template option)";
  }
  if (t.family_ == ChatFamily::kChatml)
    t.default_system_ = find_default_system_prompt(template_text);
  return t;
}

ChatTemplate ChatTemplate::for_tokenizer(const Tokenizer& tokenizer,
                                         std::string_view override_name) {
  if (!override_name.empty()) return by_name(override_name);
  return detect(tokenizer.chat_template());
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

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt) const {
  std::string out;
  switch (family_) {
    case ChatFamily::kChatml: {
      const bool has_system = std::any_of(messages.begin(), messages.end(),
                                          [](const ChatMessage& m) { return m.role == "system"; });
      if (!default_system_.empty() && !has_system) {
        out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
      }
      for (const ChatMessage& m : messages) {
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      }
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      break;
    }
    case ChatFamily::kLlama3: {
      for (const ChatMessage& m : messages) {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) +
               "<|eot_id|>";
      }
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    }
    case ChatFamily::kPhi3: {
      for (const ChatMessage& m : messages) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
      if (add_generation_prompt) out += "<|assistant|>\n";
      break;
    }
    case ChatFamily::kGemma: {
      // Gemma has no system role: the system text opens the next user turn.
      std::string system;
      for (const ChatMessage& m : messages) {
        if (m.role == "system") {
          system = trim(m.content);
          continue;
        }
        const std::string role = m.role == "assistant" ? "model" : m.role;
        out += "<start_of_turn>" + role + "\n";
        if (!system.empty() && role != "model") {
          out += system + "\n\n";
          system.clear();
        }
        out += trim(m.content) + "<end_of_turn>\n";
      }
      if (add_generation_prompt) out += "<start_of_turn>model\n";
      break;
    }
    case ChatFamily::kMistralV7: {
      for (const ChatMessage& m : messages) {
        require_basic_role(*this, m.role);
        if (m.role == "system") {
          out += "[SYSTEM_PROMPT] " + m.content + "[/SYSTEM_PROMPT]";
        } else if (m.role == "user") {
          out += "[INST] " + m.content + "[/INST]";
        } else {
          out += " " + m.content + "</s>";
        }
      }
      break;
    }
    case ChatFamily::kMistralV1:
    case ChatFamily::kMistralV3:
    case ChatFamily::kMistralV3Tekken: {
      const std::string lead = family_ == ChatFamily::kMistralV1 ? " " : "";
      const std::string trail = family_ == ChatFamily::kMistralV3Tekken ? "" : " ";
      const bool trim_answer = family_ == ChatFamily::kMistralV3;
      bool in_turn = false;
      for (const ChatMessage& m : messages) {
        require_basic_role(*this, m.role);
        if (!in_turn) {
          out += lead + "[INST]" + trail;
          in_turn = true;
        }
        if (m.role == "system") {
          out += m.content + "\n\n";
        } else if (m.role == "user") {
          out += m.content + lead + "[/INST]";
        } else {
          out += trail + (trim_answer ? trim(m.content) : m.content) + "</s>";
          in_turn = false;
        }
      }
      break;
    }
    case ChatFamily::kLlama2:
    case ChatFamily::kLlama2Sys:
    case ChatFamily::kLlama2SysBos:
    case ChatFamily::kLlama2SysStrip: {
      const bool system_block = family_ != ChatFamily::kLlama2;
      const bool bos_in_history = family_ == ChatFamily::kLlama2SysBos;
      const bool strip = family_ == ChatFamily::kLlama2SysStrip;
      bool in_turn = true;  // the first [INST] follows the BOS the tokenizer adds
      out += "[INST] ";
      for (const ChatMessage& m : messages) {
        require_basic_role(*this, m.role);
        const std::string content = strip ? trim(m.content) : m.content;
        if (!in_turn) {
          in_turn = true;
          out += bos_in_history ? "<s>[INST] " : "[INST] ";
        }
        if (m.role == "system") {
          out += system_block ? "<<SYS>>\n" + content + "\n<</SYS>>\n\n" : content + "\n";
        } else if (m.role == "user") {
          out += content + " [/INST]";
        } else {
          out += content + "</s>";
          in_turn = false;
        }
      }
      break;
    }
  }
  return out;
}

}  // namespace tkv::tok
