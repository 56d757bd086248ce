#include "template/lexer.h"

#include <cctype>

#include "common/escape.h"
#include "template/template.h"

namespace tkv::tmpl {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

class Lexer {
 public:
  Lexer(std::string_view src, const std::string& name) : src_(src), name_(name) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      std::string text(src_.substr(pos_, tag - pos_));
      const size_t text_start = pos_;
      advance_to(tag);
      if (tag == src_.size()) {
        emit_text(std::move(text));
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char control = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (control == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (control != '+' && kind != '{') {
        lstrip_block(text, text_start == 0 || src_[text_start - 1] == '\n');
      }
      emit_text(std::move(text));
      advance_to(tag + 2 + (control == '-' || control == '+' ? 1 : 0));
      if (kind == '#') {
        comment();
      } else if (kind == '%' && raw_block()) {
        continue;
      } else {
        tag_body(kind == '{');
      }
    }
    out_.push_back({Tok::kEof, "", line_});
    return std::move(out_);
  }

 private:
  [[noreturn]] void error(const std::string& reason) const {
    throw TemplateError(name_, line_, reason);
  }

  size_t find_tag(size_t from) const {
    for (size_t p = src_.find('{', from); p != std::string_view::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#'))
        return p;
    }
    return src_.size();
  }

  void advance_to(size_t p) {
    for (; pos_ < p; ++pos_)
      if (src_[pos_] == '\n') ++line_;
  }

  // lstrip_blocks: spaces and tabs between the line start and a block tag.
  static void lstrip_block(std::string& text, bool line_starting) {
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if (l_pos == 0 && !line_starting) return;
    for (size_t i = l_pos; i < text.size(); ++i)
      if (text[i] != ' ' && text[i] != '\t') return;
    text.resize(l_pos);
  }

  void emit_text(std::string text) {
    if (text.empty()) return;
    std::string norm;  // newline_sequence "\n": \r\n and \r become \n
    norm.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\r') {
        norm += '\n';
        if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
      } else {
        norm += text[i];
      }
    }
    out_.push_back({Tok::kText, std::move(norm), line_});
  }

  // After a tag's closing delimiter: "-" strips whitespace, otherwise a
  // block or comment (trim_blocks) drops one newline.
  void after_close(char control, bool block) {
    if (control == '-') {
      size_t p = pos_;
      while (p < src_.size() && is_space(src_[p])) ++p;
      advance_to(p);
    } else if (block && control != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);
    }
  }

  void comment() {
    const int start_line = line_;
    const size_t end = src_.find("#}", pos_);
    if (end == std::string_view::npos) {
      line_ = start_line;
      error("unterminated comment ({# without #})");
    }
    const char control = end > pos_ ? src_[end - 1] : '\0';
    advance_to(end + 2);
    after_close(control == '-' || control == '+' ? control : '\0', true);
  }

  // {% raw %}...{% endraw %}: the text between goes out as is. At pos_
  // (just after "{%"): consumes the block and returns true when it is one.
  bool raw_block() {
    size_t p = pos_;
    auto skip_ws = [&](size_t q) {
      while (q < src_.size() && is_space(src_[q])) ++q;
      return q;
    };
    p = skip_ws(p);
    if (src_.substr(p, 3) != "raw" || (p + 3 < src_.size() && name_char(src_[p + 3]))) return false;
    p = skip_ws(p + 3);
    const char open_control = src_.substr(p, 1) == "-" ? '-' : '\0';
    if (open_control) ++p;
    if (src_.substr(p, 2) != "%}") return false;
    const size_t body = p + 2;
    for (size_t q = src_.find("{%", body); q != std::string_view::npos;
         q = src_.find("{%", q + 2)) {
      size_t r = q + 2;
      const bool strip_before = r < src_.size() && src_[r] == '-';
      r = skip_ws(r + (strip_before || (r < src_.size() && src_[r] == '+') ? 1 : 0));
      if (src_.substr(r, 6) != "endraw") continue;
      r = skip_ws(r + 6);
      const char close_control =
          r < src_.size() && (src_[r] == '-' || src_[r] == '+') ? src_[r] : '\0';
      if (close_control) ++r;
      if (src_.substr(r, 2) != "%}") continue;
      std::string text(src_.substr(body, q - body));
      if (open_control == '-')
        text.erase(0, text.find_first_not_of(" \t\n\r\v\f") == std::string::npos
                          ? text.size()
                          : text.find_first_not_of(" \t\n\r\v\f"));
      if (strip_before)
        while (!text.empty() && is_space(text.back())) text.pop_back();
      advance_to(body);
      emit_text(std::move(text));
      advance_to(r + 2);
      after_close(close_control, true);
      return true;
    }
    error("unterminated raw block ({% raw %} without {% endraw %})");
  }

  // Is there a closing delimiter at pos_ (with its control character)?
  bool at_close(bool var, char* control, size_t* len) const {
    const std::string_view close = var ? "}}" : "%}";
    std::string_view rest = src_.substr(pos_);
    if ((rest.substr(0, 1) == "-" || rest.substr(0, 1) == "+") && rest.substr(1, 2) == close) {
      *control = rest[0];
      *len = 3;
      return true;
    }
    if (rest.substr(0, 2) == close) {
      *control = '\0';
      *len = 2;
      return true;
    }
    return false;
  }

  void tag_body(bool var) {
    const int start_line = line_;
    out_.push_back({var ? Tok::kVarBegin : Tok::kBlockBegin, "", line_});
    int depth = 0;
    for (;;) {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= src_.size()) {
        line_ = start_line;
        error(var ? "unterminated '{{' (no '}}' before the end)"
                  : "unterminated '{%' (no '%}' before the end)");
      }
      char control = '\0';
      size_t len = 0;
      if (depth == 0 && at_close(var, &control, &len)) {
        out_.push_back({var ? Tok::kVarEnd : Tok::kBlockEnd, "", line_});
        advance_to(pos_ + len);
        after_close(control, !var);
        return;
      }
      const char c = src_[pos_];
      if (name_start(c)) {
        size_t e = pos_;
        while (e < src_.size() && name_char(src_[e])) ++e;
        out_.push_back({Tok::kName, std::string(src_.substr(pos_, e - pos_)), line_});
        advance_to(e);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        number();
      } else if (c == '\'' || c == '"') {
        string_literal(c);
      } else {
        op(&depth);
      }
    }
  }

  void number() {
    size_t e = pos_;
    bool is_float = false;
    auto digits = [&] {
      while (e < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_'))
        ++e;
    };
    digits();
    if (e + 1 < src_.size() && src_[e] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      is_float = true;
      ++e;
      digits();
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
        is_float = true;
        e = x;
        digits();
      }
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i)
      if (src_[i] != '_') text += src_[i];
    out_.push_back({is_float ? Tok::kFloat : Tok::kInt, text, line_});
    advance_to(e);
  }

  uint32_t hex(size_t at, size_t n) const {
    if (at + n > src_.size()) error("truncated escape in a string");
    uint32_t v = 0;
    for (size_t i = at; i < at + n; ++i) {
      const char c = src_[i];
      if (!std::isxdigit(static_cast<unsigned char>(c))) error("bad hex digit in a string escape");
      v = v * 16 + uint32_t(std::isdigit(static_cast<unsigned char>(c))
                                ? c - '0'
                                : (std::tolower(c) - 'a' + 10));
    }
    return v;
  }

  void string_literal(char quote) {
    const int start_line = line_;
    std::string value;
    size_t p = pos_ + 1;
    for (;; ++p) {
      if (p >= src_.size()) {
        line_ = start_line;
        error("unterminated string literal");
      }
      const char c = src_[p];
      if (c == quote) break;
      if (c != '\\' || p + 1 >= src_.size()) {
        value += c;
        continue;
      }
      const char e = src_[++p];
      switch (e) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case '0':
          value += '\0';
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case '\n':
          break;  // line continuation
        case 'x':
          append_utf8(value, hex(p + 1, 2)), p += 2;
          break;
        case 'u':
          append_utf8(value, hex(p + 1, 4)), p += 4;
          break;
        case 'U': {
          const uint32_t cp = hex(p + 1, 8);
          if (cp > 0x10FFFF) error("bad \\U escape in a string");
          append_utf8(value, cp);
          p += 8;
          break;
        }
        default:
          value += '\\', value += e;
      }
    }
    out_.push_back({Tok::kString, std::move(value), line_});
    advance_to(p + 1);
  }

  void op(int* depth) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    const std::string_view rest = src_.substr(pos_);
    for (const std::string_view t : kTwo) {
      if (rest.substr(0, 2) == t) {
        out_.push_back({Tok::kOp, std::string(t), line_});
        advance_to(pos_ + 2);
        return;
      }
    }
    const char c = src_[pos_];
    if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos) {
      error(std::string("unexpected character '") +
            (c >= 0x20 && c < 0x7f ? std::string(1, c) : "\\x..") + "'");
    }
    if (c == '(' || c == '[' || c == '{') ++*depth;
    if ((c == ')' || c == ']' || c == '}') && *depth > 0) --*depth;
    out_.push_back({Tok::kOp, std::string(1, c), line_});
    advance_to(pos_ + 1);
  }

  std::string_view src_;
  const std::string& name_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex(std::string_view source, const std::string& name) {
  if (!source.empty() && source.back() == '\n')
    source.remove_suffix(1);  // keep_trailing_newline=False
  return Lexer(source, name).run();
}

}  // namespace tkv::tmpl
