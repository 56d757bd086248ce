// Runs a Grammar (grammar.h) over bytes: a pushdown automaton whose state
// is the set of parse stacks still alive (llama.cpp's llama_grammar_stacks),
// made fast by interning. Every stack is a node in a shared tree (its top
// position and the stack below it), so a stack is one number; every set of
// stacks is interned as a State; and each State caches its transition per
// byte. Text that visits the same parse situation again (the inside of a
// JSON string, the gap between two keys at the same depth) reuses the
// states and transitions already built, so advancing is a table lookup and
// a mask over the vocabulary (token_mask.h) walks a trie on lookups.
//
// A Matcher belongs to one generation (one thread at a time); the Grammar
// it runs may be shared.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace tkv::grammar {

class Matcher {
 public:
  using State = uint32_t;
  static constexpr State kDead = 0xFFFFFFFFu;  // no stack survived: the bytes are rejected

  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  const Grammar& grammar() const { return *grammar_; }
  // The state before any byte.
  State start() const { return start_; }
  // The state after `byte`, or kDead. Cached after the first call.
  State step(State s, uint8_t byte) {
    if (s == kDead) return kDead;
    const uint32_t t = next_[size_t(s) * 256 + byte];
    return t != kUnknown ? t : compute(s, byte);
  }
  // The state after `bytes` (kDead once one is rejected; kDead stays kDead).
  State advance(State s, std::string_view bytes);
  // The bytes so far form a complete sentence of the grammar.
  bool accepting(State s) const { return s != kDead && flags_[s] & kAccepting; }
  // A complete sentence that nothing may extend: only the end may follow.
  bool complete(State s) const { return s != kDead && flags_[s] & kComplete; }

  size_t state_count() const { return states_.size(); }
  size_t memory_bytes() const;
  // When more than `limit` states are cached, forgets every state but
  // `keep` (stack nodes included) and returns its new id; otherwise `keep`.
  State compact(State keep, size_t limit);

 private:
  static constexpr uint32_t kUnknown = 0xFFFFFFFEu;
  static constexpr uint8_t kAccepting = 1, kComplete = 2;

  struct Node {
    uint32_t pos;
    uint32_t parent;
  };
  struct VecHash {
    size_t operator()(const std::vector<uint32_t>& v) const;
  };

  State compute(State s, uint8_t byte);
  uint32_t push(uint32_t parent, uint32_t pos);
  // Every stack `stack` can become before its next byte: rule references
  // at the top are replaced by their alternatives (left recursion was
  // refused when the grammar was built, so this ends), appended to `out`.
  void closure(uint32_t stack, std::vector<uint32_t>& out);
  State intern(std::vector<uint32_t>& stacks);
  void reset_tables();

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;  // nodes_[0]: the empty stack
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<std::vector<uint32_t>> states_;  // sorted stack ids
  std::unordered_map<std::vector<uint32_t>, State, VecHash> state_ids_;
  std::vector<uint8_t> flags_;
  std::vector<uint32_t> next_;  // states_.size() x 256 transitions
  State start_ = kDead;
  // Scratch of compute() / closure(): visited marks by node, a work list.
  std::vector<uint32_t> seen_;
  uint32_t epoch_ = 0;
  std::vector<uint32_t> work_;
  std::vector<uint32_t> found_;
};

// Whether `text` is a complete sentence of `grammar`.
bool matches(std::shared_ptr<const Grammar> grammar, std::string_view text);

// At most this many stacks in one state: a grammar ambiguous enough to keep
// more alive is refused (tkv::Error) instead of slowing every step down.
constexpr size_t kMaxStacksPerState = 1 << 16;

}  // namespace tkv::grammar
