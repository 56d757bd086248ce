// A Jinja2 interpreter for chat templates: the subset real chat templates
// use (docs/TEMPLATES.md), executed with the environment Hugging Face's
// apply_chat_template gives them (trim_blocks, lstrip_blocks, loop
// controls, {% generation %}, tojson as Python's json.dumps,
// raise_exception, strftime_now).
//
//   Template t = Template::parse(source, "model.jinja");   // TemplateError at a syntax error
//   std::string prompt = t.render(variables);               // TemplateError when rendering fails
//
// Rendering is bounded: output size, loop iterations and call depth have
// limits (RenderLimits), so a hostile template fails with a clear error
// instead of hanging or exhausting memory.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "common/error.h"

namespace tkv::tmpl {

// One line: "chat template NAME line N: REASON". reason() is REASON alone;
// raised() tells a template's own raise_exception(REASON) from other errors.
class TemplateError : public Error {
 public:
  TemplateError(const std::string& name, int line, std::string reason, bool raised = false);
  const std::string& reason() const { return reason_; }
  int line() const { return line_; }
  bool raised() const { return raised_; }

 private:
  std::string reason_;
  int line_;
  bool raised_;
};

struct RenderLimits {
  size_t max_output_bytes = size_t(64) << 20;  // every string the template builds, together
  uint64_t max_steps = 50'000'000;             // loop iterations + statements + calls
  int max_depth = 200;                         // nested macro calls / expression evaluation
};

struct RenderOptions {
  RenderLimits limits;
  // What strftime_now() formats; unset: the local time at the call.
  std::optional<std::tm> now;
};

struct Program;  // the parsed statements (ast.h)

class Template {
 public:
  static Template parse(std::string_view source, std::string name = "template");
  // `variables`: a JSON object; its members are the template's variables.
  std::string render(const nlohmann::ordered_json& variables,
                     const RenderOptions& options = {}) const;
  const std::string& name() const { return name_; }
  const std::string& source() const { return source_; }

 private:
  std::shared_ptr<const Program> program_;
  std::string name_;
  std::string source_;
};

}  // namespace tkv::tmpl
