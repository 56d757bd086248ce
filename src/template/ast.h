// The parsed form of a template: statements holding expressions.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace tkv::tmpl {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class K {
    kLiteral,  // value
    kName,     // name
    kList,     // args: items
    kTuple,    // args: items
    kDict,     // args: key, value, key, value, ...
    kAttr,     // args[0] . name
    kItem,     // args[0] [ args[1] ]
    kSlice,    // args[0] [ args[1] : args[2] : args[3] ] (null = left out)
    kCall,     // args[0] ( args[1..], kwargs )
    kFilter,   // args[0] | name ( args[1..], kwargs ); args[0] null in a filter block
    kTest,     // args[0] is [not] name ( args[1..] )
    kUnary,    // name in {not, -, +}: args[0]
    kBinary,   // args[0] name args[1]; name: an operator, "in", "not in", "and", "or"
    kCond,     // args[0] if args[1] else args[2] (null: undefined)
  };
  K k;
  int line = 0;
  int height = 1;  // 1 + the highest child's
  Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Param {
  std::string name;
  ExprPtr default_value;  // null: none
};

struct Stmt {
  enum class K {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches (a null condition is the else branch)
    kFor,          // targets in expr [if filter]: body [else else_body]
    kSet,          // targets (or targets[0].attr) = expr
    kSetBlock,     // {% set targets[0] [| filter] %}body{% endset %}
    kMacro,        // {% macro name(params) %}body
    kCallBlock,    // {% call(params) expr %}body
    kFilterBlock,  // {% filter expr %}body
    kWith,         // {% with targets = values %}body
    kBlock,        // body rendered as is ({% generation %})
    kBreak,
    kContinue,
  };
  K k;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::string attr;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<Param> params;
  std::vector<ExprPtr> values;
  Body body;
  Body else_body;
};

struct Program {
  Body body;
};

}  // namespace tkv::tmpl
