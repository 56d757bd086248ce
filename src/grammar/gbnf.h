// GBNF, llama.cpp's grammar format (its grammars/README.md), parsed into a
// Grammar (grammar.h):
//   root  ::= "{" ws pair ("," ws pair)* "}"     # a comment
//   pair  ::= [a-z]+ ":" ws ( "true" | "false" )
//   ws    ::= [ \t\n]*
// Rules `name ::= alternatives` (names: letters, digits, '-', '_'); a rule
// ends at a newline unless inside parentheses or after '|'. Terminals:
// "literals" and [character classes] ([^...] negated, a-z ranges) with the
// escapes \t \n \r \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH; `.` is any
// character. Groups ( ... ), repetitions * + ? {m} {m,} {m,n} {,n}.
// Literals and classes are characters (UTF-8 in the output; \xHH is the
// code point HH, as in llama.cpp). The start rule is `root`.
#pragma once

#include <string>
#include <string_view>

#include "grammar/grammar.h"

namespace tkv::grammar {

// Throws tkv::Error "grammar: line L, column C: <problem>" for a syntax
// error, or "grammar: ..." for an undefined rule, a missing root, left
// recursion, or a grammar over the size limits (grammar.h).
Grammar parse_gbnf(std::string_view text);

// `text` as a GBNF literal: quoted, with \" \\ and control bytes escaped.
std::string gbnf_literal(const std::string& text);

}  // namespace tkv::grammar
