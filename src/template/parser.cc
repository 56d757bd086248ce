#include "template/parser.h"

#include <charconv>
#include <cstdlib>
#include <set>

#include "template/renderer.h"
#include "template/template.h"

namespace tkv::tmpl {

namespace {

ExprPtr make(Expr::K k, int line) {
  auto e = std::make_unique<Expr>();
  e->k = k;
  e->line = line;
  return e;
}

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::kText:
      return "text";
    case Tok::kVarBegin:
      return "'{{'";
    case Tok::kVarEnd:
      return "'}}'";
    case Tok::kBlockBegin:
      return "'{%'";
    case Tok::kBlockEnd:
      return "'%}'";
    case Tok::kName:
      return "'" + t.text + "'";
    case Tok::kString:
      return "a string";
    case Tok::kInt:
    case Tok::kFloat:
      return "a number";
    case Tok::kOp:
      return "'" + t.text + "'";
    default:
      return "the end of the template";
  }
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& name) : t_(std::move(tokens)), name_(name) {}

  Program run() {
    Program p;
    std::string end;
    p.body = body({}, &end);
    return p;
  }

 private:
  // ---- token helpers -------------------------------------------------------
  const Token& peek(size_t ahead = 0) const {
    const size_t i = std::min(i_ + ahead, t_.size() - 1);
    return t_[i];
  }
  const Token& next() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).type == Tok::kOp && peek(ahead).text == op;
  }
  bool is_name(std::string_view n, size_t ahead = 0) const {
    return peek(ahead).type == Tok::kName && peek(ahead).text == n;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  [[noreturn]] void error(const std::string& reason) const {
    throw TemplateError(name_, peek().line, reason);
  }
  [[noreturn]] void unexpected(const std::string& expected) const {
    error("expected " + expected + ", got " + describe(peek()));
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) unexpected("'" + std::string(op) + "'");
  }
  std::string expect_name() {
    if (peek().type != Tok::kName) unexpected("a name");
    return next().text;
  }
  void expect_block_end() {
    if (peek().type != Tok::kBlockEnd) unexpected("'%}'");
    next();
  }

  struct Depth {
    explicit Depth(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth)
        p_.error("nesting deeper than " + std::to_string(kMaxParseDepth) + " levels");
    }
    ~Depth() { --p_.depth_; }
    Parser& p_;
  };

  // ---- statements ------------------------------------------------------------
  // Statements until a block tag whose keyword is in `ends` (consumed
  // up to the keyword, returned in *end), or the end of the template.
  Body body(const std::set<std::string>& ends, std::string* end) {
    Depth depth(*this);
    Body out;
    for (;;) {
      const Token& t = peek();
      if (t.type == Tok::kEof) {
        if (!ends.empty()) error("unexpected end of template, expected " + join_ends(ends));
        return out;
      }
      if (t.type == Tok::kText) {
        auto s = stmt(Stmt::K::kText, t.line);
        s->text = next().text;
        out.push_back(std::move(s));
      } else if (t.type == Tok::kVarBegin) {
        auto s = stmt(Stmt::K::kOutput, next().line);
        s->expr = tuple_expr(true);
        if (peek().type != Tok::kVarEnd) unexpected("'}}'");
        next();
        out.push_back(std::move(s));
      } else {
        next();  // {%
        if (peek().type == Tok::kName && ends.count(peek().text)) {
          *end = next().text;
          return out;
        }
        out.push_back(statement());
      }
    }
  }

  static std::string join_ends(const std::set<std::string>& ends) {
    std::string s;
    for (const std::string& e : ends) s += (s.empty() ? "'" : " or '") + e + "'";
    return s;
  }

  static StmtPtr stmt(Stmt::K k, int line) {
    auto s = std::make_unique<Stmt>();
    s->k = k;
    s->line = line;
    return s;
  }

  StmtPtr statement() {
    if (peek().type != Tok::kName) unexpected("a tag name");
    const Token& t = next();
    const std::string& kw = t.text;
    if (kw == "if") return if_stmt(t.line);
    if (kw == "for") return for_stmt(t.line);
    if (kw == "set") return set_stmt(t.line);
    if (kw == "macro") return macro_stmt(t.line);
    if (kw == "call") return call_stmt(t.line);
    if (kw == "filter") return filter_stmt(t.line);
    if (kw == "with") return with_stmt(t.line);
    if (kw == "generation") {
      auto s = stmt(Stmt::K::kBlock, t.line);
      expect_block_end();
      s->body = closed_body("endgeneration");
      return s;
    }
    if (kw == "break" || kw == "continue") {
      if (loops_ == 0) error("'" + kw + "' outside a loop");
      expect_block_end();
      return stmt(kw == "break" ? Stmt::K::kBreak : Stmt::K::kContinue, t.line);
    }
    static const std::set<std::string> kUnsupported = {"include", "import", "from", "extends",
                                                       "block",   "raw",    "do"};
    if (kUnsupported.count(kw)) error("the '" + kw + "' tag is not supported in chat templates");
    error("unknown tag '" + kw + "'");
  }

  // A body that must end with {% end %}; the end tag is consumed whole.
  Body closed_body(const std::string& end_kw) {
    std::string end;
    Body b = body({end_kw}, &end);
    expect_block_end();
    return b;
  }

  StmtPtr if_stmt(int line) {
    auto s = stmt(Stmt::K::kIf, line);
    ExprPtr cond = tuple_expr(false);
    for (;;) {
      expect_block_end();
      std::string end;
      Body b = body({"elif", "else", "endif"}, &end);
      s->branches.emplace_back(std::move(cond), std::move(b));
      if (end == "endif") {
        expect_block_end();
        break;
      }
      if (end == "else") {
        expect_block_end();
        s->branches.emplace_back(nullptr, closed_body("endif"));
        break;
      }
      cond = tuple_expr(false);
    }
    return s;
  }

  StmtPtr for_stmt(int line) {
    auto s = stmt(Stmt::K::kFor, line);
    s->targets = assign_targets();
    if (!skip_name("in")) unexpected("'in'");
    s->expr = tuple_expr(false);
    if (skip_name("if")) s->filter = expression(true);
    if (is_name("recursive")) error("recursive loops are not supported");
    expect_block_end();
    ++loops_;
    std::string end;
    s->body = body({"else", "endfor"}, &end);
    --loops_;
    expect_block_end();
    if (end == "else") s->else_body = closed_body("endfor");
    return s;
  }

  std::vector<std::string> assign_targets() {
    std::vector<std::string> names;
    const bool paren = skip_op("(");
    do {
      if (paren && is_op(")")) break;
      names.push_back(expect_name());
    } while (skip_op(","));
    if (paren) expect_op(")");
    return names;
  }

  StmtPtr set_stmt(int line) {
    auto s = stmt(Stmt::K::kSet, line);
    if (peek().type == Tok::kName && is_op(".", 1)) {
      s->targets.push_back(next().text);
      next();
      s->attr = expect_name();
    } else {
      s->targets = assign_targets();
    }
    if (skip_op("=")) {
      s->expr = tuple_expr(true);
      expect_block_end();
      return s;
    }
    if (!s->attr.empty() || s->targets.size() != 1) unexpected("'='");
    s->k = Stmt::K::kSetBlock;
    if (skip_op("|")) s->filter = filter_chain(nullptr);
    expect_block_end();
    s->body = closed_body("endset");
    return s;
  }

  std::vector<Param> params() {
    std::vector<Param> out;
    expect_op("(");
    while (!is_op(")")) {
      if (!out.empty()) expect_op(",");
      if (is_op(")")) break;
      Param p;
      p.name = expect_name();
      if (skip_op("=")) p.default_value = expression(true);
      out.push_back(std::move(p));
    }
    next();
    return out;
  }

  StmtPtr macro_stmt(int line) {
    auto s = stmt(Stmt::K::kMacro, line);
    s->text = expect_name();
    s->params = params();
    expect_block_end();
    const int loops = loops_;
    loops_ = 0;
    s->body = closed_body("endmacro");
    loops_ = loops;
    return s;
  }

  StmtPtr call_stmt(int line) {
    auto s = stmt(Stmt::K::kCallBlock, line);
    if (is_op("(")) s->params = params();
    s->expr = expression(true);
    if (s->expr->k != Expr::K::kCall) error("a call block needs a call, e.g. {% call m() %}");
    expect_block_end();
    const int loops = loops_;
    loops_ = 0;
    s->body = closed_body("endcall");
    loops_ = loops;
    return s;
  }

  StmtPtr filter_stmt(int line) {
    auto s = stmt(Stmt::K::kFilterBlock, line);
    s->filter = filter_chain(nullptr);
    expect_block_end();
    s->body = closed_body("endfilter");
    return s;
  }

  StmtPtr with_stmt(int line) {
    auto s = stmt(Stmt::K::kWith, line);
    while (peek().type != Tok::kBlockEnd) {
      if (!s->targets.empty()) expect_op(",");
      s->targets.push_back(expect_name());
      expect_op("=");
      s->values.push_back(expression(true));
    }
    expect_block_end();
    s->body = closed_body("endwith");
    return s;
  }

  // ---- expressions ---------------------------------------------------------
  // Expression trees stay shallow enough to evaluate and free recursively:
  // "a + a + ... + a" or "x.a.b.c..." nests one node per operator.
  static constexpr int kMaxExprHeight = 400;
  void note_child(Expr& parent, const Expr& child) {
    parent.height = std::max(parent.height, child.height + 1);
    if (parent.height > kMaxExprHeight)
      error("expression nested deeper than " + std::to_string(kMaxExprHeight) + " levels");
  }
  void attach(Expr& parent, ExprPtr child) {
    if (child) note_child(parent, *child);
    parent.args.push_back(std::move(child));
  }

  // Comma-separated expressions: a tuple when there is a comma.
  ExprPtr tuple_expr(bool with_cond) {
    const int line = peek().line;
    ExprPtr first = expression(with_cond);
    if (!is_op(",")) return first;
    auto t = make(Expr::K::kTuple, line);
    attach(*t, std::move(first));
    while (skip_op(",")) {
      if (at_expression_end()) break;
      attach(*t, expression(with_cond));
    }
    return t;
  }

  bool at_expression_end() const {
    const Token& t = peek();
    return t.type == Tok::kVarEnd || t.type == Tok::kBlockEnd || t.type == Tok::kEof ||
           (t.type == Tok::kOp && (t.text == ")" || t.text == "]" || t.text == "}"));
  }

  ExprPtr expression(bool with_cond) {
    Depth depth(*this);
    ExprPtr e = or_expr();
    if (!with_cond) return e;
    while (is_name("if")) {
      const int line = next().line;
      auto c = make(Expr::K::kCond, line);
      ExprPtr cond = or_expr();
      ExprPtr otherwise = skip_name("else") ? expression(true) : nullptr;
      attach(*c, std::move(e));
      attach(*c, std::move(cond));
      attach(*c, std::move(otherwise));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr l, ExprPtr r, int line) {
    auto b = make(Expr::K::kBinary, line);
    b->name = std::move(op);
    attach(*b, std::move(l));
    attach(*b, std::move(r));
    return b;
  }

  ExprPtr or_expr() {
    ExprPtr l = and_expr();
    while (is_name("or")) {
      const int line = next().line;
      l = binary("or", std::move(l), and_expr(), line);
    }
    return l;
  }

  ExprPtr and_expr() {
    ExprPtr l = not_expr();
    while (is_name("and")) {
      const int line = next().line;
      l = binary("and", std::move(l), not_expr(), line);
    }
    return l;
  }

  ExprPtr not_expr() {
    if (is_name("not")) {
      Depth depth(*this);
      auto u = make(Expr::K::kUnary, next().line);
      u->name = "not";
      attach(*u, not_expr());
      return u;
    }
    return compare();
  }

  ExprPtr compare() {
    ExprPtr l = arithmetic();
    bool compared = false;
    for (;;) {
      const int line = peek().line;
      std::string op;
      if (peek().type == Tok::kOp &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
           peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (compared) error("chained comparisons (a < b < c) are not supported; use 'and'");
      compared = true;
      l = binary(op, std::move(l), arithmetic(), line);
    }
    return l;
  }

  ExprPtr arithmetic() {
    ExprPtr l = concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      l = binary(t.text, std::move(l), concat(), t.line);
    }
    return l;
  }

  ExprPtr concat() {
    ExprPtr l = product();
    while (is_op("~")) {
      const int line = next().line;
      l = binary("~", std::move(l), product(), line);
    }
    return l;
  }

  ExprPtr product() {
    ExprPtr l = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      l = binary(t.text, std::move(l), power(), t.line);
    }
    return l;
  }

  ExprPtr power() {
    ExprPtr l = unary(true);
    while (is_op("**")) {
      const int line = next().line;
      l = binary("**", std::move(l), unary(true), line);
    }
    return l;
  }

  ExprPtr unary(bool with_filter) {
    Depth depth(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      e = make(Expr::K::kUnary, t.line);
      e->name = t.text;
      attach(*e, unary(false));
    } else {
      e = postfix(primary());
    }
    return with_filter ? filters_and_tests(std::move(e)) : std::move(e);
  }

  ExprPtr literal(Value v, int line) {
    auto e = make(Expr::K::kLiteral, line);
    e->value = std::move(v);
    return e;
  }

  ExprPtr number(const Token& t) {
    if (t.type == Tok::kFloat)
      return literal(Value::number(std::strtod(t.text.c_str(), nullptr)), t.line);
    int64_t v = 0;
    const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (r.ec != std::errc()) error("integer literal " + t.text + " is too large");
    return literal(Value::integer(v), t.line);
  }

  ExprPtr primary() {
    const Token& t = next();
    switch (t.type) {
      case Tok::kName: {
        if (t.text == "true" || t.text == "True") return literal(Value::boolean(true), t.line);
        if (t.text == "false" || t.text == "False") return literal(Value::boolean(false), t.line);
        if (t.text == "none" || t.text == "None") return literal(Value::none(), t.line);
        auto e = make(Expr::K::kName, t.line);
        e->name = t.text;
        return e;
      }
      case Tok::kString: {
        std::string s = t.text;
        while (peek().type == Tok::kString) s += next().text;  // adjacent literals join
        return literal(Value::string(std::move(s)), t.line);
      }
      case Tok::kInt:
      case Tok::kFloat:
        return number(t);
      case Tok::kOp:
        if (t.text == "(") {
          if (skip_op(")")) return make(Expr::K::kTuple, t.line);
          ExprPtr e = tuple_expr(true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") return collection(Expr::K::kList, "]");
        if (t.text == "{") return dict_literal();
        break;
      default:
        break;
    }
    --i_;
    unexpected("an expression");
  }

  ExprPtr collection(Expr::K k, std::string_view close) {
    auto e = make(k, peek().line);
    while (!skip_op(close)) {
      if (!e->args.empty()) {
        expect_op(",");
        if (skip_op(close)) break;
      }
      attach(*e, expression(true));
    }
    return e;
  }

  ExprPtr dict_literal() {
    auto e = make(Expr::K::kDict, peek().line);
    while (!skip_op("}")) {
      if (!e->args.empty()) {
        expect_op(",");
        if (skip_op("}")) break;
      }
      attach(*e, expression(true));
      expect_op(":");
      attach(*e, expression(true));
    }
    return e;
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".") || is_op("[")) {
        e = subscript(std::move(e));
      } else if (is_op("(")) {
        auto c = make(Expr::K::kCall, peek().line);
        attach(*c, std::move(e));
        call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr e) {
    const Token& t = next();
    if (t.text == ".") {
      if (peek().type == Tok::kInt) {
        auto g = make(Expr::K::kItem, t.line);
        attach(*g, std::move(e));
        attach(*g, number(next()));
        return g;
      }
      auto a = make(Expr::K::kAttr, t.line);
      a->name = expect_name();
      attach(*a, std::move(e));
      return a;
    }
    ExprPtr parts[3];
    int n = 0;
    bool slice = false;
    for (;;) {
      if (!is_op(":") && !is_op("]")) parts[n] = expression(true);
      if (!skip_op(":")) break;
      slice = true;
      if (++n > 2) error("a slice has at most 3 parts");
    }
    expect_op("]");
    auto g = make(slice ? Expr::K::kSlice : Expr::K::kItem, t.line);
    attach(*g, std::move(e));
    if (!slice && !parts[0]) error("empty subscript");
    for (int i = 0; i < (slice ? 3 : 1); ++i) attach(*g, std::move(parts[i]));
    return g;
  }

  void call_args(Expr& call) {
    expect_op("(");
    bool first = true;
    while (!skip_op(")")) {
      if (!first) {
        expect_op(",");
        if (skip_op(")")) break;
      }
      first = false;
      if (peek().type == Tok::kName && is_op("=", 1)) {
        std::string key = next().text;
        next();
        ExprPtr value = expression(true);
        note_child(call, *value);
        call.kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        if (!call.kwargs.empty()) error("a positional argument follows keyword arguments");
        attach(call, expression(true));
      }
    }
  }

  ExprPtr filters_and_tests(ExprPtr e) {
    for (;;) {
      if (skip_op("|")) {
        e = filter_chain(std::move(e), true);
      } else if (is_name("is")) {
        e = test(std::move(e));
      } else if (is_op("(")) {
        auto c = make(Expr::K::kCall, peek().line);
        attach(*c, std::move(e));
        call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  // NAME[(args)] [| NAME[(args)] ...] applied to e (null in a filter block).
  ExprPtr filter_chain(ExprPtr e, bool single = false) {
    for (;;) {
      auto f = make(Expr::K::kFilter, peek().line);
      f->name = expect_name();
      while (skip_op(".")) {
        f->name += '.';
        f->name += expect_name();
      }
      if (!known_filter(f->name)) error("no filter named '" + f->name + "'");
      attach(*f, std::move(e));
      if (is_op("(")) call_args(*f);
      e = std::move(f);
      if (single || !skip_op("|")) return e;
    }
  }

  ExprPtr test(ExprPtr e) {
    auto t = make(Expr::K::kTest, next().line);
    t->negated = skip_name("not");
    t->name = expect_name();
    if (!known_test(t->name)) error("no test named '" + t->name + "'");
    attach(*t, std::move(e));
    const Token& p = peek();
    if (is_op("(")) {
      call_args(*t);
    } else if ((p.type == Tok::kName && p.text != "else" && p.text != "or" && p.text != "and" &&
                p.text != "if" && p.text != "is" && p.text != "in" && p.text != "not") ||
               p.type == Tok::kString || p.type == Tok::kInt || p.type == Tok::kFloat ||
               (p.type == Tok::kOp && (p.text == "[" || p.text == "{"))) {
      attach(*t, postfix(primary()));
    }
    return t;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  const std::string& name_;
  int depth_ = 0;
  int loops_ = 0;
};

}  // namespace

Program parse_tokens(std::vector<Token> tokens, const std::string& name) {
  return Parser(std::move(tokens), name).run();
}

}  // namespace tkv::tmpl
