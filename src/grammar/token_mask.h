// Grammar-constrained sampling over a vocabulary.
//
// TokenTrie: the vocabulary's token byte strings as a trie in preorder
// (built once per vocabulary, shared by every request). The allowed tokens
// of a grammar state are found by one walk of it: each node advances the
// matcher by its byte (a cached table lookup, matcher.h), and a rejected
// byte skips the node's whole subtree, so a token shares the work of every
// token it extends and whole families of tokens are dropped at once. And
// where the state's bytes mostly lead to one next state, step after step
// (the inside of a string: back to itself, or to "one more character"
// under maxLength), a node whose every byte below is among those bytes, for
// as deep as its subtree goes, takes the whole subtree at once: each node
// keeps the classes of the bytes below it and its height.
//
// GrammarConstraint: the sample::TokenConstraint of one generation: the
// grammar's matcher at the output so far, the mask of its state (cached
// per state, so the inside of a string costs one walk, not one per token),
// and the end: the end tokens (EOS, end of turn) are allowed exactly where
// the grammar accepts; where nothing may follow they are all that is left,
// so the grammar's accept state ends generation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "sample/constraint.h"

namespace tkv::grammar {

class TokenTrie {
 public:
  // `token_bytes[id]`: the bytes token id stands for in running text; empty
  // for tokens a grammar never allows (control tokens: the end tokens are
  // handled by GrammarConstraint).
  explicit TokenTrie(std::vector<std::string> token_bytes);

  int32_t n_vocab() const { return int32_t(bytes_.size()); }
  const std::string& bytes(int32_t token) const { return bytes_[size_t(token)]; }
  size_t node_count() const { return nodes_.size(); }

  // Sets bit t of `bits` (n_vocab bits, cleared first) for every token t
  // whose bytes `m` accepts from state `s`.
  void allowed(Matcher& m, Matcher::State s, std::vector<uint64_t>& bits) const;

 private:
  struct Node {
    uint64_t below;   // byte_class() bits of every byte in the subtree below
    uint32_t end;     // one past the last node of this node's subtree
    uint32_t tokens;  // first index in tokens_ of the tokens ending here
    uint16_t depth;   // bytes from the root
    uint16_t height;  // bytes of the longest path below
    uint8_t byte;     // the byte that leads here from the parent
  };
  // 64 classes of bytes: each of 0x20-0x3F alone, pairs of 0x40-0x7D, and
  // one for the rest (controls, 0x7E-0xFF).
  static int byte_class(uint8_t b) {
    if (b >= 0x20 && b < 0x40) return b - 0x20 + 1;
    if (b >= 0x40 && b < 0x7E) return 33 + ((b - 0x40) >> 1);
    return 0;
  }
  class Run;

  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;  // preorder; nodes_[0] is the root
  std::vector<int32_t>
      tokens_;  // token ids by node (node i: [nodes_[i].tokens, nodes_[i+1].tokens))
  size_t max_depth_ = 0;
};

class GrammarConstraint : public sample::TokenConstraint {
 public:
  // `end_tokens`: the tokens that end generation (EOS, EOT, a template's
  // end-of-turn markers).
  GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                    std::vector<int32_t> end_tokens);

  void mask(float* logits, int n_vocab) override;
  // An end token leaves the state as it is; any other token advances it by
  // its bytes (tkv::Error if the grammar rejects them).
  void accept(int32_t token) override;

  // The tokens allowed next, as n_vocab bits (cached per state).
  const std::vector<uint64_t>& allowed();
  bool accepting() const { return matcher_.accepting(state_); }
  bool complete() const { return matcher_.complete(state_); }
  const Matcher& matcher() const { return matcher_; }

 private:
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<int32_t> end_tokens_;
  Matcher matcher_;
  Matcher::State state_;
  std::unordered_map<Matcher::State, std::vector<uint64_t>> masks_;
};

// Bounds on what one generation caches: matcher states kept before they are
// forgotten (about 1 KiB each) and masks (n_vocab / 8 bytes each).
constexpr size_t kMaxCachedStates = 4096;
constexpr size_t kMaxCachedMasks = 64;

}  // namespace tkv::grammar
