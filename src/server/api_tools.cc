#include "server/api_tools.h"

#include <algorithm>
#include <set>

#include "server/api_json.h"

namespace tkv::server {
namespace {

using namespace api_json;
using ordered = nlohmann::ordered_json;

// OpenAI's rule for function names.
bool valid_function_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 &&
         std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-'; });
}

const std::string& function_name(const json& v, const std::string& param) {
  const std::string& name = as_string(v, param);
  if (!valid_function_name(name))
    invalid_value(param, "'" + clipped(name) +
                             "' is not a valid function name (1 to 64 of a-z, A-Z, 0-9, _ and -).");
  return name;
}

void check_keys(const json& object, std::initializer_list<std::string_view> known,
                const std::string& param) {
  for (const auto& [name, value] : object.items())
    if (std::find(known.begin(), known.end(), name) == known.end())
      unrecognized(param + "." + name);
}

// One entry of `tools`; returns its function's name.
std::string parse_tool(const json& t, const std::string& param) {
  if (!t.is_object()) invalid_type(param, "an object", t);
  check_keys(t, {"type", "function"}, param);
  const json* type = field(t, "type");
  if (!type) missing(param + ".type");
  if (as_string(*type, param + ".type") != "function")
    reject("Invalid value for '" + param + ".type': tools of type '" +
               clipped(type->get<std::string>()) + "' are not supported (use 'function').",
           param + ".type", "unsupported_value");
  const json* fn = field(t, "function");
  if (!fn) missing(param + ".function");
  const std::string fparam = param + ".function";
  if (!fn->is_object()) invalid_type(fparam, "an object", *fn);
  check_keys(*fn, {"name", "description", "parameters", "strict"}, fparam);
  const json* name = field(*fn, "name");
  if (!name) missing(fparam + ".name");
  if (const json* d = field(*fn, "description")) as_string(*d, fparam + ".description");
  if (const json* p = field(*fn, "parameters"); p && !p->is_object())
    invalid_type(fparam + ".parameters", "an object (a JSON Schema)", *p);
  if (const json* s = field(*fn, "strict")) as_bool(*s, fparam + ".strict");
  return function_name(*name, fparam + ".name");
}

void parse_tool_choice(const json& v, const std::set<std::string>& names, GenerationRequest& r) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "auto")
      r.tool_choice = ToolChoice::kAuto;
    else if (s == "none")
      r.tool_choice = ToolChoice::kNone;
    else if (s == "required")
      r.tool_choice = ToolChoice::kRequired;
    else
      invalid_value("tool_choice", "'" + clipped(s) +
                                       "' is not one of 'none', 'auto', 'required' (or an object "
                                       "naming a function).");
  } else if (v.is_object()) {
    check_keys(v, {"type", "function"}, "tool_choice");
    const json* type = field(v, "type");
    if (!type) missing("tool_choice.type");
    if (as_string(*type, "tool_choice.type") != "function")
      invalid_value("tool_choice.type", "expected 'function'.");
    const json* fn = field(v, "function");
    if (!fn) missing("tool_choice.function");
    if (!fn->is_object()) invalid_type("tool_choice.function", "an object", *fn);
    check_keys(*fn, {"name"}, "tool_choice.function");
    const json* name = field(*fn, "name");
    if (!name) missing("tool_choice.function.name");
    r.tool_choice = ToolChoice::kNamed;
    r.tool_choice_name = function_name(*name, "tool_choice.function.name");
    if (!names.count(r.tool_choice_name))
      invalid_value("tool_choice.function.name",
                    "no tool named '" + clipped(r.tool_choice_name) + "' is in 'tools'.");
  } else {
    invalid_type("tool_choice", "a string or an object", v);
  }
  if ((r.tool_choice == ToolChoice::kRequired) && names.empty())
    invalid_value("tool_choice", "'required' needs at least one tool in 'tools'.");
}

void parse_tool_call(const json& c, const std::string& param) {
  if (!c.is_object()) invalid_type(param, "an object", c);
  check_keys(c, {"id", "type", "function"}, param);
  const json* id = field(c, "id");
  if (!id) missing(param + ".id");
  as_string(*id, param + ".id");
  if (const json* type = field(c, "type"); type && as_string(*type, param + ".type") != "function")
    invalid_value(param + ".type", "expected 'function'.");
  const json* fn = field(c, "function");
  if (!fn) missing(param + ".function");
  if (!fn->is_object()) invalid_type(param + ".function", "an object", *fn);
  check_keys(*fn, {"name", "arguments"}, param + ".function");
  const json* name = field(*fn, "name");
  if (!name) missing(param + ".function.name");
  as_string(*name, param + ".function.name");
  const json* args = field(*fn, "arguments");
  if (!args) missing(param + ".function.arguments");
  as_string(*args, param + ".function.arguments");
}

}  // namespace

void parse_tool_fields(const json& body, const ordered& ordered_body, GenerationRequest& r) {
  std::set<std::string> names;
  if (const json* v = field(body, "tools")) {
    if (!v->is_array()) invalid_type("tools", "an array", *v);
    for (size_t i = 0; i < v->size(); ++i) {
      const std::string param = "tools[" + std::to_string(i) + "]";
      const std::string name = parse_tool((*v)[i], param);
      if (!names.insert(name).second)
        invalid_value(param + ".function.name", "'" + clipped(name) + "' is named twice.");
    }
    r.tools = ordered_body["tools"];
  }
  if (const json* v = field(body, "tool_choice")) parse_tool_choice(*v, names, r);
  if (const json* v = field(body, "parallel_tool_calls"))
    r.parallel_tool_calls = as_bool(*v, "parallel_tool_calls");
}

void parse_message_tool_fields(const json& m, const std::string& param, tok::ChatMessage& message) {
  if (message.role == "tool") {
    const json* id = field(m, "tool_call_id");
    if (!id) missing(param + ".tool_call_id");
    message.fields["tool_call_id"] = as_string(*id, param + ".tool_call_id");
    if (const json* name = field(m, "name"))
      message.fields["name"] = as_string(*name, param + ".name");
    return;
  }
  if (message.role != "assistant") {
    // An empty tool_calls list is what some clients send on every message.
    for (const char* key : {"tool_calls", "reasoning_content"})
      if (const json* v = field(m, key); v && !(v->is_array() && v->empty()))
        invalid_value(param + "." + key,
                      "only assistant messages carry '" + std::string(key) + "'.");
    if (field(m, "tool_call_id"))
      invalid_value(param + ".tool_call_id", "only tool messages carry 'tool_call_id'.");
    return;
  }
  if (field(m, "tool_call_id"))
    invalid_value(param + ".tool_call_id", "only tool messages carry 'tool_call_id'.");
  if (const json* r = field(m, "reasoning_content"))
    message.fields["reasoning_content"] = as_string(*r, param + ".reasoning_content");
  const json* calls = field(m, "tool_calls");
  if (!calls) return;
  if (!calls->is_array()) invalid_type(param + ".tool_calls", "an array", *calls);
  if (calls->empty()) return;
  ordered list = ordered::array();
  for (size_t i = 0; i < calls->size(); ++i) {
    const json& c = (*calls)[i];
    parse_tool_call(c, param + ".tool_calls[" + std::to_string(i) + "]");
    list.push_back(
        {{"id", c["id"]},
         {"type", "function"},
         {"function",
          {{"name", c["function"]["name"]}, {"arguments", c["function"]["arguments"]}}}});
  }
  message.fields["tool_calls"] = std::move(list);
}

ordered chat_tools(const json& tools, const ordered& ordered_tools, const ToolConverter& convert) {
  if (!tools.is_array()) invalid_type("tools", "an array", tools);
  ordered out = ordered::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string param = "tools[" + std::to_string(i) + "]";
    if (!tools[i].is_object()) invalid_type(param, "an object", tools[i]);
    out.push_back({{"type", "function"}, {"function", convert(ordered_tools[i], param)}});
  }
  return out;
}

void parse_chat_form_tools(
    const ordered& chat, GenerationRequest& r,
    std::initializer_list<std::pair<std::string_view, std::string_view>> renames) {
  try {
    parse_tool_fields(json::parse(chat.dump()), chat, r);
  } catch (RequestError& e) {
    for (std::string* text : {&e.error.param, &e.error.message})
      for (const auto& [from, to] : renames)
        for (size_t at = 0; (at = text->find(from, at)) != std::string::npos; at += to.size())
          text->replace(at, from.size(), to);
    throw;
  }
}

}  // namespace tkv::server
