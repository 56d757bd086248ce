// The families whose arguments are not JSON text: Qwen XML parameters and
// Gemma 4's value syntax, both converted to a JSON object.
#include <string>

#include "chat_output/call_parse.h"

namespace tkv::chat::detail {
namespace {

using Json = nlohmann::ordered_json;

bool eat(std::string_view& text, std::string_view prefix) {
  if (text.substr(0, prefix.size()) != prefix) return false;
  text.remove_prefix(prefix.size());
  return true;
}

// Text up to `end` (removed from `text` with `end`); nullopt without it.
std::optional<std::string_view> until(std::string_view& text, std::string_view end) {
  const size_t at = text.find(end);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view head = text.substr(0, at);
  text.remove_prefix(at + end.size());
  return head;
}

// A parameter's text: kept as JSON when it reads as a number, boolean,
// null, object or array; a string otherwise (a quoted "x" included: the
// format writes strings bare).
Json parameter_value(std::string_view text) {
  Json v = Json::parse(text.begin(), text.end(), nullptr, false);
  if (v.is_discarded() || v.is_string()) return std::string(text);
  return v;
}

constexpr std::string_view kQuote = "<|\"|>";

std::optional<Json> gemma_value(std::string_view& text, int depth);

// {key:value,...} with bare keys.
std::optional<Json> gemma_dict(std::string_view& text, int depth) {
  Json out = Json::object();
  text = trim(text);
  if (eat(text, "}")) return out;
  for (;;) {
    const auto key = until(text, ":");
    if (!key || trim(*key).empty()) return std::nullopt;
    auto value = gemma_value(text, depth + 1);
    if (!value) return std::nullopt;
    out[std::string(trim(*key))] = std::move(*value);
    text = trim(text);
    if (eat(text, "}")) return out;
    if (!eat(text, ",")) return std::nullopt;
    text = trim(text);
  }
}

std::optional<Json> gemma_array(std::string_view& text, int depth) {
  Json out = Json::array();
  text = trim(text);
  if (eat(text, "]")) return out;
  for (;;) {
    auto value = gemma_value(text, depth + 1);
    if (!value) return std::nullopt;
    out.push_back(std::move(*value));
    text = trim(text);
    if (eat(text, "]")) return out;
    if (!eat(text, ",")) return std::nullopt;
  }
}

std::optional<Json> gemma_value(std::string_view& text, int depth) {
  if (depth > 64) return std::nullopt;
  text = trim(text);
  if (eat(text, kQuote)) {
    const auto s = until(text, kQuote);
    if (!s) return std::nullopt;
    return Json(std::string(*s));
  }
  if (eat(text, "{")) return gemma_dict(text, depth);
  if (eat(text, "[")) return gemma_array(text, depth);
  const size_t end = text.find_first_of(",}]");
  const std::string_view token = trim(text.substr(0, end));
  text.remove_prefix(end == std::string_view::npos ? text.size() : end);
  Json v = Json::parse(token.begin(), token.end(), nullptr, false);
  if (v.is_discarded() || !(v.is_number() || v.is_boolean() || v.is_null())) return std::nullopt;
  return v;
}

}  // namespace

// <function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function>
std::optional<ToolCall> parse_qwen_xml_call(std::string_view body) {
  std::string_view t = trim(body);
  if (!eat(t, "<function=")) return std::nullopt;
  const auto name = until(t, ">");
  if (!name || trim(*name).empty()) return std::nullopt;
  Json args = Json::object();
  for (;;) {
    t = trim(t);
    if (eat(t, "</function>")) break;
    if (!eat(t, "<parameter=")) return std::nullopt;
    const auto key = until(t, ">");
    if (!key) return std::nullopt;
    eat(t, "\n");
    auto value = until(t, "</parameter>");
    if (!value) return std::nullopt;
    if (!value->empty() && value->back() == '\n') value->remove_suffix(1);
    args[std::string(trim(*key))] = parameter_value(*value);
  }
  if (!trim(t).empty()) return std::nullopt;
  return ToolCall{std::string(trim(*name)), *arguments_text(args)};
}

// call:NAME{key:<|"|>text<|"|>,n:1,...}
std::optional<ToolCall> parse_gemma4_call(std::string_view body) {
  std::string_view t = trim(body);
  if (!eat(t, "call:")) return std::nullopt;
  const size_t brace = t.find('{');
  if (brace == std::string_view::npos) return std::nullopt;
  const std::string name(trim(t.substr(0, brace)));
  t.remove_prefix(brace + 1);
  auto args = gemma_dict(t, 0);
  if (name.empty() || !args || !trim(t).empty()) return std::nullopt;
  return ToolCall{name, *arguments_text(*args)};
}

}  // namespace tkv::chat::detail
