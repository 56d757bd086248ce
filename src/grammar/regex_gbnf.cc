// pattern_to_gbnf (json_schema.h): the regular-expression subset of JSON
// Schema's `pattern` as a GBNF expression over a JSON string's characters.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/utf8_ranges.h"

namespace tkv::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

constexpr int kMaxGroupDepth = 64;

// Characters a JSON string writes escaped; a pattern that asks for them is
// refused, any negated class or `.` leaves them out.
bool json_escaped(uint32_t c) {
  return c < 0x20 || c == '"' || c == '\\';
}

std::string class_char(uint32_t c) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  if (c == '\\' || c == ']' || c == '[' || c == '-' || c == '^' || c == '"') {
    out.push_back('\\');
    out.push_back(char(c));
  } else if (c < 0x20 || c == 0x7F) {
    const char esc[5] = {'\\', 'x', hex[c >> 4], hex[c & 15], '\0'};
    out.append(esc, 4);
  } else {
    append_utf8(c, out);
  }
  return out;
}

std::string class_text(const Ranges& ranges, bool negated) {
  std::string out = negated ? "[^" : "[";
  for (const auto& [lo, hi] : ranges)
    out += lo == hi ? class_char(lo) : class_char(lo) + "-" + class_char(hi);
  if (negated) out += "\\\"\\\\\\x00-\\x1F";  // never what JSON escapes
  return out + "]";
}

class Regex {
 public:
  explicit Regex(const std::string& p) : p_(p) {}

  std::string translate() {
    if (p_.size() < 2 || p_.front() != '^' || p_.back() != '$')
      error("must be anchored: start with ^ and end with $");
    i_ = 1;
    end_ = p_.size() - 1;
    std::string r = alternatives(0);
    if (i_ != end_) error("unbalanced ')'");
    return r;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail("json schema: pattern '", one_line(p_.substr(0, 80)), "' ", one_line(what));
  }
  char peek() const { return i_ < end_ ? p_[i_] : '\0'; }

  std::string alternatives(int depth) {
    if (depth > kMaxGroupDepth) error("nests groups too deeply");
    std::vector<std::string> alts{sequence(depth)};
    while (peek() == '|') {
      ++i_;
      alts.push_back(sequence(depth));
    }
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : " ") + alts[k];
    return out + " )";
  }

  std::string sequence(int depth) {
    std::string out;
    while (i_ < end_ && peek() != '|' && peek() != ')') {
      std::string a = atom(depth);
      a += quantifier();
      out += (out.empty() ? "" : " ") + a;
    }
    return out.empty() ? "\"\"" : out;
  }

  std::string quantifier() {
    const char c = peek();
    std::string q;
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      q = std::string(1, c);
    } else if (c == '{') {
      const size_t close = p_.find('}', i_);
      if (close == std::string::npos || close >= end_) error("has an unclosed '{'");
      q = p_.substr(i_, close - i_ + 1);
      check_braces(q);
      i_ = close + 1;
    }
    if (!q.empty() && peek() == '?') ++i_;  // lazy: the same language
    if (!q.empty() && (peek() == '*' || peek() == '+' || peek() == '{'))
      error("repeats a repetition");
    return q;
  }

  // {m}, {m,} or {m,n} with m <= n <= kMaxRepeat (what GBNF takes).
  void check_braces(const std::string& q) const {
    const std::string body = q.substr(1, q.size() - 2);
    const size_t comma = body.find(',');
    const std::string lo = body.substr(0, comma);
    const std::string hi = comma == std::string::npos ? lo : body.substr(comma + 1);
    auto number = [&](const std::string& d, bool may_be_empty) {
      if (d.empty() && may_be_empty) return -1L;
      if (d.empty() || d.size() > 4 || d.find_first_not_of("0123456789") != std::string::npos)
        error("has a bad repetition " + q);
      return std::stol(d);
    };
    const long min = number(lo, false), max = number(hi, comma != std::string::npos);
    if (min > kMaxRepeat || max > kMaxRepeat)
      error("repeats more than " + std::to_string(kMaxRepeat) + " times");
    if (max >= 0 && max < min) error("has a repetition maximum below its minimum");
  }

  uint32_t utf8_char() {
    const auto b = uint8_t(p_[i_]);
    const int n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    if (i_ + size_t(n) > end_) error("is not valid UTF-8");
    uint32_t cp = n == 1 ? b : b & (0x3F >> (n - 1));
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(p_[i_ + size_t(k)]) & 0x3F);
    i_ += size_t(n);
    return cp;
  }

  std::string atom(int depth) {
    const char c = peek();
    if (c == '(') {
      ++i_;
      if (peek() == '?') {
        if (i_ + 1 >= end_ || p_[i_ + 1] != ':') error("uses lookaround or named groups");
        i_ += 2;
      }
      std::string inner = alternatives(depth + 1);
      if (peek() != ')') error("has an unclosed '('");
      ++i_;
      return "( " + inner + " )";
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return class_text({}, true);
    }
    if (c == '*' || c == '+' || c == '?' || c == '{')
      error(std::string("has nothing to repeat before '") + c + "'");
    if (c == '^' || c == '$') error("has an anchor inside it");
    if (c == '\\') {
      Ranges r;
      bool negated = false;
      const uint32_t lit = escape(r, negated);
      if (r.empty()) return literal(lit);
      return class_text(r, negated);
    }
    return literal(utf8_char());
  }

  std::string literal(uint32_t c) {
    if (json_escaped(c)) error("asks for a character JSON escapes");
    std::string s;
    append_utf8(c, s);
    return "\"" + s + "\"";
  }

  // After '\': a literal character (returned), or a class (\d \w \D \W in
  // `r`, negated or not).
  uint32_t escape(Ranges& r, bool& negated) {
    ++i_;
    if (i_ >= end_) error("ends with '\\'");
    const char e = p_[i_++];
    switch (e) {
      case 'd':
      case 'D':
        r = {{'0', '9'}};
        negated = e == 'D';
        return 0;
      case 'w':
      case 'W':
        r = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
        negated = e == 'W';
        return 0;
      default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
          error(std::string("uses the unsupported escape '\\") + e + "'");
        return uint8_t(e);
    }
  }

  std::string char_class() {
    ++i_;  // '['
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++i_;
    }
    Ranges ranges;
    bool first = true;
    while (first || peek() != ']') {
      if (i_ >= end_) error("has an unclosed '['");
      first = false;
      uint32_t lo;
      if (peek() == '\\') {
        Ranges r;
        bool neg = false;
        lo = escape(r, neg);
        if (neg) error("uses \\D or \\W inside a class");
        if (!r.empty()) {
          ranges.insert(ranges.end(), r.begin(), r.end());
          continue;
        }
      } else {
        lo = utf8_char();
      }
      uint32_t hi = lo;
      if (peek() == '-' && i_ + 1 < end_ && p_[i_ + 1] != ']') {
        ++i_;
        if (peek() == '\\') {
          Ranges r;
          bool neg = false;
          hi = escape(r, neg);
          if (!r.empty()) error("has a range ending in a class");
        } else {
          hi = utf8_char();
        }
        if (hi < lo) error("has a range out of order");
      }
      ranges.emplace_back(lo, hi);
    }
    ++i_;  // ']'
    if (!negated)
      for (const auto& [lo, hi] : ranges)
        if (lo < 0x20 || (lo <= '"' && hi >= '"') || (lo <= '\\' && hi >= '\\'))
          error("asks for a character JSON escapes");
    return class_text(ranges, negated);
  }

  const std::string& p_;
  size_t i_ = 0;
  size_t end_ = 0;
};

}  // namespace

std::string pattern_to_gbnf(const std::string& pattern) {
  return Regex(pattern).translate();
}

}  // namespace tkv::grammar
