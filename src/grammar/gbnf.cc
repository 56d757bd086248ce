#include "grammar/gbnf.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/error.h"
#include "grammar/utf8_ranges.h"

namespace tkv::grammar {
namespace {

using Sequence = GrammarBuilder::Sequence;
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

constexpr int kMaxNesting = 200;

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Grammar parse() {
    skip_space(true);
    while (!at_end()) parse_rule();
    return builder_.finish();
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    fail("grammar: line ", line, ", column ", col, ": ", one_line(what));
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  void skip_space(bool newline_ok) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
      } else if ((c == '\n' || c == '\r') && newline_ok) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_word_char(peek())) ++pos_;
    if (pos_ == start) error("expecting a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  void parse_rule() {
    const size_t name_pos = pos_;
    const std::string name = parse_name();
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=") error("expecting '::=' after rule name '" + name + "'");
    pos_ += 3;
    skip_space(true);
    const uint32_t id = builder_.rule(name);
    if (builder_.defined(id)) {
      pos_ = name_pos;
      error("rule '" + name + "' is defined twice");
    }
    builder_.define(id, parse_alternates(name, 0));
    if (peek() == '\r') ++pos_;
    if (peek() == '\n') {
      ++pos_;
    } else if (!at_end()) {
      error("expecting a newline or the end of the grammar");
    }
    skip_space(true);
  }

  std::vector<Sequence> parse_alternates(const std::string& name, int depth) {
    if (depth > kMaxNesting) error("groups nested deeper than " + std::to_string(kMaxNesting));
    std::vector<Sequence> alts;
    alts.push_back(parse_sequence(name, depth));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(name, depth));
    }
    return alts;
  }

  // One character of a literal or a class: an escape or a UTF-8 character.
  uint32_t parse_char() {
    if (at_end()) error("unexpected end of the grammar");
    const char c = peek();
    if (c == '\\') return parse_escape();
    const uint8_t b = uint8_t(c);
    if (b < 0x80) {
      ++pos_;
      return b;
    }
    const int n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (n == 0 || b > 0xF4) error("invalid UTF-8");
    uint32_t cp = b & (0x3F >> (n - 1));
    for (int i = 1; i < n; ++i) {
      const uint8_t cont = uint8_t(peek(size_t(i)));
      if ((cont & 0xC0) != 0x80) error("invalid UTF-8");
      cp = (cp << 6) | (cont & 0x3F);
    }
    const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) error("invalid UTF-8");
    pos_ += size_t(n);
    return cp;
  }

  uint32_t parse_escape() {
    ++pos_;  // the backslash
    const char e = peek();
    ++pos_;
    switch (e) {
      case 'x':
        return parse_hex(2);
      case 'u':
        return parse_hex(4);
      case 'U':
        return parse_hex(8);
      case 't':
        return '\t';
      case 'r':
        return '\r';
      case 'n':
        return '\n';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
        return uint8_t(e);
      default:
        pos_ -= 2;  // at the backslash
        error(e == '\0' ? std::string("unexpected end after '\\'")
                        : std::string("unknown escape '\\") + e + "'");
    }
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = hex_value(peek());
      if (h < 0) error("expecting " + std::to_string(digits) + " hex digits");
      v = (v << 4) | uint32_t(h);
      ++pos_;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) error("escape is not a Unicode scalar value");
    return v;
  }

  void parse_literal(Sequence& seq) {
    ++pos_;  // the opening quote
    std::string bytes;
    while (peek() != '"') {
      if (at_end()) error("unterminated literal");
      append_utf8(parse_char(), bytes);
    }
    ++pos_;
    builder_.append_literal(seq, bytes);
  }

  GrammarBuilder::Symbol parse_class() {
    ++pos_;  // '['
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    Ranges ranges;
    while (peek() != ']') {
      if (at_end()) error("unterminated character class");
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        hi = parse_char();
        if (hi < lo) error("character range is out of order");
      }
      ranges.emplace_back(lo, hi);
    }
    ++pos_;
    return builder_.char_class(normalized(std::move(ranges), negated));
  }

  static Ranges normalized(Ranges r, bool negated) {
    std::sort(r.begin(), r.end());
    Ranges merged;
    for (const auto& x : r) {
      if (!merged.empty() && x.first <= merged.back().second + 1)
        merged.back().second = std::max(merged.back().second, x.second);
      else
        merged.push_back(x);
    }
    if (!negated) return merged;
    Ranges out;
    uint32_t next = 0;
    for (const auto& [lo, hi] : merged) {
      if (lo > next) out.emplace_back(next, lo - 1);
      next = hi + 1;
    }
    if (next <= 0x10FFFF) out.emplace_back(next, 0x10FFFF);
    return out;
  }

  int parse_count() {
    int v = 0;
    const size_t start = pos_;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxRepeat) error("repetition count over " + std::to_string(kMaxRepeat));
      ++pos_;
    }
    return pos_ == start ? -1 : v;
  }

  // {m} {m,} {m,n} {,n} -> min, max (max -1: unbounded).
  std::pair<int, int> parse_braces() {
    ++pos_;  // '{'
    skip_space(false);
    int min = parse_count();
    int max = min;
    skip_space(false);
    if (peek() == ',') {
      ++pos_;
      skip_space(false);
      max = parse_count();
      skip_space(false);
    } else if (min < 0) {
      error("expecting a number in '{...}'");
    }
    if (peek() != '}') error("expecting '}'");
    ++pos_;
    if (min < 0) min = 0;
    if (max >= 0 && max < min) error("repetition maximum below its minimum");
    return {min, max};
  }

  Sequence parse_sequence(const std::string& name, int depth) {
    Sequence seq;
    size_t last = seq.size();
    bool have_last = false;
    const bool nested = depth > 0;
    while (!at_end()) {
      const char c = peek();
      const size_t start = seq.size();
      if (c == '"') {
        parse_literal(seq);
      } else if (c == '[') {
        seq.push_back(parse_class());
      } else if (c == '.') {
        ++pos_;
        seq.push_back(builder_.char_class({{0, 0x10FFFF}}));
      } else if (is_word_char(c)) {
        seq.push_back(builder_.ref(builder_.rule(parse_name())));
      } else if (c == '(') {
        ++pos_;
        skip_space(true);
        std::vector<Sequence> alts = parse_alternates(name, depth + 1);
        if (peek() != ')') error("expecting ')'");
        ++pos_;
        seq.push_back(builder_.ref(builder_.fresh_rule(name, std::move(alts))));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_last) error(std::string("expecting an item before '") + c + "'");
        int min = c == '+' ? 1 : 0, max = c == '?' ? 1 : -1;
        if (c == '{')
          std::tie(min, max) = parse_braces();
        else
          ++pos_;
        const Sequence x(seq.begin() + std::ptrdiff_t(last), seq.end());
        seq.resize(last);
        builder_.append_repeat(seq, x, min, max, name);
        have_last = false;  // x** is an error, as in llama.cpp
        skip_space(nested);
        continue;
      } else {
        break;
      }
      last = start;
      have_last = true;
      skip_space(nested);
    }
    return seq;
  }

  std::string_view text_;
  size_t pos_ = 0;
  GrammarBuilder builder_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text) {
  return Parser(text).parse();
}

std::string gbnf_literal(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c == 0x7F) {
      static const char* hex = "0123456789ABCDEF";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

}  // namespace tkv::grammar
