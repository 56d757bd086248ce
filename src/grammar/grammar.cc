#include "grammar/grammar.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "common/error.h"
#include "grammar/utf8_ranges.h"

namespace tkv::grammar {

uint32_t GrammarBuilder::rule(const std::string& name) {
  if (const auto it = ids_.find(name); it != ids_.end()) return it->second;
  ids_.emplace(name, uint32_t(names_.size()));
  names_.push_back(name);
  rules_.emplace_back();
  defined_.push_back(false);
  return uint32_t(names_.size() - 1);
}

uint32_t GrammarBuilder::fresh_rule(const std::string& base, std::vector<Sequence> alternatives) {
  // Generated names cannot clash with GBNF names: they hold a '#'.
  names_.push_back(base + "#" + std::to_string(names_.size()));
  rules_.emplace_back();
  defined_.push_back(false);
  const uint32_t id = uint32_t(names_.size() - 1);
  define(id, std::move(alternatives));
  return id;
}

void GrammarBuilder::define(uint32_t rule, std::vector<Sequence> alternatives) {
  for (const Sequence& s : alternatives) symbols_ += s.size() + 1;
  check_size();
  rules_[rule] = std::move(alternatives);
  defined_[rule] = true;
}

void GrammarBuilder::check_size() {
  if (symbols_ > kMaxGrammarSymbols || names_.size() > kMaxGrammarSymbols)
    fail("grammar: too large (over ", kMaxGrammarSymbols,
         " symbols once repetitions are expanded)");
}

GrammarBuilder::Symbol GrammarBuilder::bytes(const ByteSet& set) {
  if (const auto it = set_ids_.find(set); it != set_ids_.end()) return {false, it->second};
  set_ids_.emplace(set, uint32_t(sets_.size()));
  sets_.push_back(set);
  return {false, uint32_t(sets_.size() - 1)};
}

GrammarBuilder::Symbol GrammarBuilder::byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return bytes(s);
}

void GrammarBuilder::append_literal(Sequence& seq, const std::string& text) {
  for (char c : text) seq.push_back(byte(uint8_t(c)));
  symbols_ += text.size();
  check_size();
}

GrammarBuilder::Symbol GrammarBuilder::char_class(
    const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  std::string key;
  for (const auto& [lo, hi] : ranges) key += std::to_string(lo) + "-" + std::to_string(hi) + ",";
  if (const auto it = class_cache_.find(key); it != class_cache_.end()) return ref(it->second);
  std::vector<Utf8Sequence> seqs;
  for (const auto& [lo, hi] : ranges) append_utf8_sequences(lo, hi, seqs);
  ByteSet ascii;
  std::vector<Sequence> alts;
  for (const Utf8Sequence& s : seqs) {
    if (s.size() == 1) {
      for (int b = s[0].lo; b <= s[0].hi; ++b) ascii.set(size_t(b));
      continue;
    }
    Sequence alt;
    for (const ByteRange& r : s) {
      ByteSet set;
      for (int b = r.lo; b <= r.hi; ++b) set.set(size_t(b));
      alt.push_back(bytes(set));
    }
    alts.push_back(std::move(alt));
  }
  if (alts.empty()) return bytes(ascii);  // ASCII only (or empty: matches nothing)
  if (ascii.any()) alts.insert(alts.begin(), Sequence{bytes(ascii)});
  const uint32_t id = fresh_rule("char", std::move(alts));
  class_cache_.emplace(std::move(key), id);
  return ref(id);
}

void GrammarBuilder::append_repeat(Sequence& seq, const Sequence& x, int min, int max,
                                   const std::string& base) {
  if (x.empty()) return;  // "" repeated is ""
  symbols_ += x.size() * size_t(std::max(min, max < 0 ? min + 1 : max));
  check_size();
  for (int i = 0; i < min; ++i) seq.insert(seq.end(), x.begin(), x.end());
  if (max < 0) {
    // star ::= x star | ""   (right recursive: the matcher's stack stays flat)
    const uint32_t star = fresh_rule(base, {});
    Sequence loop = x;
    loop.push_back(ref(star));
    define(star, {loop, {}});
    seq.push_back(ref(star));
    return;
  }
  // up to k more: opt_k ::= x opt_{k-1} | ""  (opt_1 ::= x | "")
  uint32_t prev = 0;
  for (int k = 1; k <= max - min; ++k) {
    Sequence more = x;
    if (k > 1) more.push_back(ref(prev));
    prev = fresh_rule(base, {more, {}});
  }
  if (max > min) seq.push_back(ref(prev));
}

Grammar GrammarBuilder::finish(const std::string& root_name) {
  Grammar g;
  bool has_root = false;
  for (uint32_t i = 0; i < names_.size(); ++i) {
    if (!defined_[i]) fail("grammar: rule '", names_[i], "' is used but not defined");
    if (names_[i] == root_name) {
      g.root = i;
      has_root = true;
    }
  }
  if (!has_root) fail("grammar: no '", root_name, "' rule");
  g.sets = sets_;
  g.names = names_;
  g.alternatives.resize(rules_.size());
  for (size_t r = 0; r < rules_.size(); ++r) {
    for (const Sequence& alt : rules_[r]) {
      g.alternatives[r].push_back(uint32_t(g.elements.size()));
      for (const Symbol& s : alt)
        g.elements.push_back({s.is_ref ? Element::kRef : Element::kBytes, s.value});
      g.elements.push_back({Element::kEnd, 0});
    }
  }
  check_no_left_recursion(g);
  return g;
}

std::string one_line(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto b = uint8_t(c);
    if (b >= 0x20 && b != 0x7F) {
      out += c;
      continue;
    }
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", b);
    out += buf;
  }
  return out;
}

void check_no_left_recursion(const Grammar& g) {
  const size_t n = g.rule_count();
  // Nullable rules: some alternative made only of nullable rule references.
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (uint32_t p : g.alternatives[r]) {
        while (g.elements[p].kind == Element::kRef && nullable[g.elements[p].value]) ++p;
        if (g.elements[p].kind == Element::kEnd) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  // Edges r -> s where s can start r; a cycle is left recursion.
  std::vector<std::vector<uint32_t>> left(n);
  for (size_t r = 0; r < n; ++r)
    for (uint32_t p : g.alternatives[r])
      for (; g.elements[p].kind == Element::kRef; ++p) {
        left[r].push_back(g.elements[p].value);
        if (!nullable[g.elements[p].value]) break;
      }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  for (size_t start = 0; start < n; ++start) {
    if (color[start]) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{uint32_t(start), 0}};
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == left[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t s = left[r][next++];
      if (color[s] == 1) fail("grammar: rule '", g.names[s], "' is left-recursive");
      if (color[s] == 0) {
        color[s] = 1;
        path.emplace_back(s, 0);
      }
    }
  }
}

namespace {

std::string set_text(const ByteSet& s) {
  if (s.count() == 1)
    for (int b = 0; b < 256; ++b)
      if (s.test(size_t(b))) {
        if (b >= 0x20 && b < 0x7F && b != '"' && b != '\\')
          return std::string("\"") + char(b) + "\"";
        char buf[16];
        std::snprintf(buf, sizeof buf, "\"\\x%02X\"", b);
        return buf;
      }
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!s.test(size_t(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && s.test(size_t(e + 1))) ++e;
    char buf[32];
    std::snprintf(buf, sizeof buf, e > b ? "\\x%02X-\\x%02X" : "\\x%02X", b, e);
    out += buf;
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::describe() const {
  std::string out;
  for (size_t r = 0; r < rule_count(); ++r) {
    out += names[r] + " ::=";
    for (size_t a = 0; a < alternatives[r].size(); ++a) {
      if (a > 0) out += " |";
      for (uint32_t p = alternatives[r][a]; elements[p].kind != Element::kEnd; ++p)
        out += " " + (elements[p].kind == Element::kRef ? names[elements[p].value]
                                                        : set_text(sets[elements[p].value]));
      if (elements[alternatives[r][a]].kind == Element::kEnd) out += " \"\"";
    }
    out += "\n";
  }
  return out;
}

}  // namespace tkv::grammar
