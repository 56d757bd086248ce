// Template source -> tokens, with Jinja2's whitespace rules as Hugging Face
// configures them: trim_blocks (the newline after a block or comment tag
// goes), lstrip_blocks (spaces and tabs before a block or comment tag on
// its own line go), "-" inside a delimiter strips all whitespace on that
// side, "+" keeps it, and one trailing newline of the source is dropped
// (keep_trailing_newline = False). Comments leave no token.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tkv::tmpl {

enum class Tok {
  kText,        // literal output
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // text holds the decoded value
  kInt,
  kFloat,
  kOp,  // text holds the operator: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  kEof,
};

struct Token {
  Tok type;
  std::string text;
  int line;
};

// Throws TemplateError (template.h) with the line and reason on a lexical error.
std::vector<Token> lex(std::string_view source, const std::string& name);

}  // namespace tkv::tmpl
