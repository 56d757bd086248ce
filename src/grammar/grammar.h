// A context-free grammar over bytes, the form every constraint on generated
// text compiles to: GBNF text (llama.cpp's grammar format, gbnf.h) and JSON
// Schemas (json_schema.h, through GBNF) both become a Grammar, which the
// Matcher (matcher.h) runs one byte at a time.
//
// Terminals are sets of bytes, never code points: a character class such as
// [^"] is compiled into the UTF-8 byte sequences of the characters it holds
// (utf8_ranges.h), so the matcher needs no decoding state, a token that ends
// inside a character is judged by the bytes it has, and only valid UTF-8 is
// ever accepted where a class or a literal asks for characters.
//
// Layout (as llama.cpp's llama_grammar_element arrays): every rule is a list
// of alternatives; every alternative is a run of elements in `elements`
// ended by kEnd. A position is an index into `elements`.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tkv::grammar {

using ByteSet = std::bitset<256>;

struct Element {
  enum Kind : uint8_t { kBytes, kRef, kEnd };
  Kind kind = kEnd;
  uint32_t value = 0;  // kBytes: index into Grammar::sets; kRef: rule id
};

struct Grammar {
  std::vector<ByteSet> sets;
  std::vector<Element> elements;
  std::vector<std::vector<uint32_t>> alternatives;  // per rule: start positions
  std::vector<std::string> names;                   // per rule
  uint32_t root = 0;

  size_t rule_count() const { return alternatives.size(); }
  // The grammar in GBNF-like text (byte sets as [\xNN-\xNN] classes): for
  // error messages, tests and debugging.
  std::string describe() const;
};

// A grammar being built: symbols are byte sets or rule references; rules
// are lists of alternatives of symbols. finish() checks it (every rule
// defined, a root, no left recursion) and lays it out.
class GrammarBuilder {
 public:
  struct Symbol {
    bool is_ref = false;
    uint32_t value = 0;  // set index or rule id
  };
  using Sequence = std::vector<Symbol>;

  // The rule called `name`, created (undefined) on first use.
  uint32_t rule(const std::string& name);
  // A fresh rule named after `base` ("base-1", "base-2", ...), defined now.
  uint32_t fresh_rule(const std::string& base, std::vector<Sequence> alternatives);
  void define(uint32_t rule, std::vector<Sequence> alternatives);
  bool defined(uint32_t rule) const { return defined_[rule]; }
  const std::string& name(uint32_t rule) const { return names_[rule]; }
  Symbol bytes(const ByteSet& set);  // interned
  Symbol byte(uint8_t b);
  Symbol ref(uint32_t rule) const { return {true, rule}; }
  // The bytes of `text` in order.
  void append_literal(Sequence& seq, const std::string& text);
  // A symbol matching one character whose code point lies in one of the
  // sorted, disjoint, inclusive `ranges` (surrogates are never matched):
  // one byte set for ASCII-only classes, a rule of byte sequences otherwise.
  Symbol char_class(const std::vector<std::pair<uint32_t, uint32_t>>& ranges);
  // x{min,max} (max < 0: unbounded) as rules; `base` names them.
  void append_repeat(Sequence& seq, const Sequence& x, int min, int max, const std::string& base);

  // tkv::Error "grammar: ..." naming the rule for an undefined rule, a
  // missing root or left recursion, or a grammar over the size limits.
  Grammar finish(const std::string& root_name = "root");

 private:
  void check_size();

  std::vector<std::string> names_;
  std::vector<std::vector<Sequence>> rules_;
  std::vector<bool> defined_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<ByteSet> sets_;
  std::unordered_map<ByteSet, uint32_t> set_ids_;
  size_t symbols_ = 0;
  std::unordered_map<std::string, uint32_t> class_cache_;
};

// Limits that keep a hostile grammar from exhausting memory.
constexpr size_t kMaxGrammarSymbols = 1 << 20;
constexpr int kMaxRepeat = 1000;

// `text` with its control characters (C0, DEL) written as \xHH, so that an
// error message quoting a grammar or a schema stays one line.
std::string one_line(std::string_view text);

// Checks that no rule can reach itself without consuming a byte (the
// matcher expands rules at the front of a stack, like llama.cpp's, and left
// recursion would never end). Throws tkv::Error naming a rule on the cycle.
void check_no_left_recursion(const Grammar& g);

}  // namespace tkv::grammar
