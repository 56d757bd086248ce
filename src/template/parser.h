// Tokens -> Program. A syntax error is a TemplateError naming the line and
// what was expected.
#pragma once

#include <string>
#include <vector>

#include "template/ast.h"
#include "template/lexer.h"

namespace tkv::tmpl {

// Nesting deeper than this (brackets, blocks) is refused, so that a
// hostile template cannot exhaust the stack of the parser or renderer.
constexpr int kMaxParseDepth = 100;

Program parse_tokens(std::vector<Token> tokens, const std::string& name);

}  // namespace tkv::tmpl
