#include "template/template.h"

#include <nlohmann/json.hpp>

#include "template/lexer.h"
#include "template/parser.h"
#include "template/renderer.h"

namespace tkv::tmpl {

namespace {

std::string one_line(const std::string& s) {
  std::string out;
  for (char c : s) out += (c == '\n' || c == '\r') ? ' ' : c;
  return out;
}

}  // namespace

TemplateError::TemplateError(const std::string& name, int line, std::string reason, bool raised)
    : Error(str("chat template ", name, " line ", line, ": ", one_line(reason))),
      reason_(std::move(reason)),
      line_(line),
      raised_(raised) {}

Template Template::parse(std::string_view source, std::string name) {
  Template t;
  t.name_ = std::move(name);
  t.source_ = std::string(source);
  t.program_ = std::make_shared<Program>(parse_tokens(lex(source, t.name_), t.name_));
  return t;
}

std::string Template::render(const nlohmann::ordered_json& variables,
                             const RenderOptions& options) const {
  auto globals = std::make_shared<Frame>(nullptr);
  add_globals(*globals);
  if (!variables.is_null() && !variables.is_object())
    throw TemplateError(name_, 0, "the variables must be a JSON object");
  Renderer r(options, globals);
  try {
    if (variables.is_object())
      for (const auto& [k, v] : variables.items()) globals->set(k, Value::from_json(v));
    return r.render(program_->body);
  } catch (const RenderFailure& f) {
    throw TemplateError(name_, r.line(), f.message, f.raised);
  }
}

}  // namespace tkv::tmpl
