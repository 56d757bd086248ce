#include "template/text.h"

#include <cctype>

#include "template/value.h"

namespace tkv::tmpl::text {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
         (c >= 0x1c && c <= 0x1f);
}

std::string strip(std::string_view s, std::string_view chars, bool left, bool right,
                  bool chars_given) {
  if (!chars_given) {  // whitespace is ASCII: bytes will do
    size_t b = 0, e = s.size();
    if (left)
      while (b < e && is_space(s[b])) ++b;
    if (right)
      while (e > b && is_space(s[e - 1])) --e;
    return std::string(s.substr(b, e - b));
  }
  const std::vector<std::string_view> cs = utf8_chars(s);
  const std::vector<std::string_view> set = utf8_chars(chars);
  auto drop = [&](std::string_view c) {
    if (!chars_given) return c.size() == 1 && is_space(c[0]);
    for (std::string_view x : set)
      if (x == c) return true;
    return false;
  };
  size_t b = 0, e = cs.size();
  if (left)
    while (b < e && drop(cs[b])) ++b;
  if (right)
    while (e > b && drop(cs[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) out += cs[i];
  return out;
}

std::vector<std::string> split(std::string_view s, std::string_view sep, bool sep_given,
                               int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep_given) {
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_space(s[i])) ++i;
      if (i == s.size()) break;
      if (maxsplit >= 0 && int64_t(out.size()) == maxsplit) {
        size_t e = s.size();
        while (e > i && is_space(s[e - 1])) --e;
        out.emplace_back(s.substr(i, e - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_space(s[j])) ++j;
      out.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  size_t start = 0;
  for (;;) {
    const size_t at = (maxsplit >= 0 && int64_t(out.size()) >= maxsplit) ? std::string_view::npos
                                                                         : s.find(sep, start);
    if (at == std::string_view::npos) {
      out.emplace_back(s.substr(start));
      return out;
    }
    out.emplace_back(s.substr(start, at - start));
    start = at + sep.size();
  }
}

std::vector<std::string> rsplit(std::string_view s, std::string_view sep, bool sep_given,
                                int64_t maxsplit) {
  if (maxsplit < 0 || !sep_given) return split(s, sep, sep_given, maxsplit);
  std::vector<std::string> rev;
  size_t end = s.size();
  while (int64_t(rev.size()) < maxsplit) {
    const size_t at = end >= sep.size() ? s.rfind(sep, end - sep.size()) : std::string_view::npos;
    if (at == std::string_view::npos) break;
    rev.emplace_back(s.substr(at + sep.size(), end - at - sep.size()));
    end = at;
  }
  rev.emplace_back(s.substr(0, end));
  return {rev.rbegin(), rev.rend()};
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string title(std::string_view s) {
  std::string out(s);
  bool prev_cased = false;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c));
    if (alpha)
      c = char(prev_cased ? std::tolower(static_cast<unsigned char>(c))
                          : std::toupper(static_cast<unsigned char>(c)));
    prev_cased = alpha;
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = char(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every character
    int64_t n = 0;
    for (std::string_view c : utf8_chars(s)) {
      if (count < 0 || n++ < count) out += to;
      out += c;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  size_t start = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t at = s.find(from, start);
    if (at == std::string_view::npos) break;
    out += s.substr(start, at - start);
    out += to;
    start = at + from.size();
  }
  out += s.substr(start);
  return out;
}

int64_t find(std::string_view s, std::string_view sub, bool reverse) {
  const size_t at = reverse ? s.rfind(sub) : s.find(sub);
  if (at == std::string_view::npos) return -1;
  return int64_t(utf8_length(s.substr(0, at)));
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return int64_t(utf8_length(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size()))
    ++n;
  return n;
}

}  // namespace tkv::tmpl::text
