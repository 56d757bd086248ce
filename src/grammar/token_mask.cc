#include "grammar/token_mask.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <numeric>
#include <utility>

#include "common/error.h"

namespace tkv::grammar {
namespace {

// Subtrees of fewer nodes are walked: the test would cost more.
constexpr uint32_t kMinSubtree = 8;
// A run is followed this deep at most, and only while it keeps this many
// byte classes (fewer: the walk's own pruning is cheaper).
constexpr size_t kMaxRun = 24;
constexpr int kMinRunClasses = 16;

}  // namespace

// The run of states from a walk's start state s: run[j+1] is the state that
// the most byte classes lead to from run[j], all their bytes alike, and
// classes[j] those classes. Extended on demand.
class TokenTrie::Run {
 public:
  Run(Matcher& m, Matcher::State s) : m_(m), states_{s} {}

  // Whether run[0..n] exists (is alive).
  bool reach(size_t n) {
    while (states_.size() <= n && !ended_) extend();
    return states_.size() > n;
  }
  Matcher::State state(size_t j) const { return states_[j]; }
  // The classes all of run[d..d+h-1] send along the run (needs reach(d+h)).
  uint64_t classes(size_t d, size_t h) const {
    uint64_t r = ~uint64_t(0);
    for (size_t j = d; j < d + h; ++j) r &= classes_[j];
    return r;
  }

 private:
  void extend() {
    const Matcher::State t = states_.back();
    std::array<Matcher::State, 64> succ;
    succ.fill(kUnset);
    uint64_t mixed = 0;
    for (int b = 0; b < 256; ++b) {
      const int c = byte_class(uint8_t(b));
      const Matcher::State n = m_.step(t, uint8_t(b));
      if (succ[size_t(c)] == kUnset)
        succ[size_t(c)] = n;
      else if (succ[size_t(c)] != n)
        mixed |= uint64_t(1) << c;
    }
    uint64_t best = 0;
    Matcher::State next = Matcher::kDead;
    for (int c = 0; c < 64; ++c) {
      if ((mixed >> c & 1) || succ[size_t(c)] == Matcher::kDead) continue;
      uint64_t same = 0;
      for (int d = 0; d < 64; ++d)
        if (!(mixed >> d & 1) && succ[size_t(d)] == succ[size_t(c)]) same |= uint64_t(1) << d;
      if (std::popcount(same) > std::popcount(best)) {
        best = same;
        next = succ[size_t(c)];
      }
    }
    if (std::popcount(best) < kMinRunClasses || states_.size() > kMaxRun) {
      ended_ = true;
      return;
    }
    classes_.push_back(best);
    states_.push_back(next);
  }

  static constexpr Matcher::State kUnset = Matcher::kDead - 1;
  Matcher& m_;
  std::vector<Matcher::State> states_;
  std::vector<uint64_t> classes_;
  bool ended_ = false;
};

TokenTrie::TokenTrie(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) {
  std::vector<int32_t> order;
  for (size_t t = 0; t < bytes_.size(); ++t)
    if (!bytes_[t].empty() && bytes_[t].size() < 0xFFFF) order.push_back(int32_t(t));
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)]; });
  nodes_.push_back({0, 0, 0, 0, 0, 0});
  std::vector<uint32_t> path{0};  // path[d]: the node at depth d of the last token
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = bytes_[size_t(id)];
    size_t lcp = 0;
    if (prev)
      while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
    while (path.size() > lcp + 1) {
      nodes_[path.back()].end = uint32_t(nodes_.size());
      path.pop_back();
    }
    for (size_t k = lcp; k < s.size(); ++k) {
      path.push_back(uint32_t(nodes_.size()));
      nodes_.push_back({0, 0, uint32_t(tokens_.size()), uint16_t(k + 1), 0, uint8_t(s[k])});
    }
    tokens_.push_back(id);
    max_depth_ = std::max(max_depth_, s.size());
    prev = &s;
  }
  for (uint32_t n : path) nodes_[n].end = uint32_t(nodes_.size());
  nodes_.push_back({0, 0, uint32_t(tokens_.size()), 0, 0, 0});  // sentinel: the last token end
  // The bytes below each node and its height, children before parents
  // (reverse preorder).
  for (size_t i = nodes_.size() - 1; i-- > 0;) {
    for (size_t c = i + 1; c < nodes_[i].end; c = nodes_[c].end) {
      nodes_[i].below |= nodes_[c].below | uint64_t(1) << byte_class(nodes_[c].byte);
      nodes_[i].height = std::max<uint16_t>(nodes_[i].height, uint16_t(nodes_[c].height + 1));
    }
  }
}

void TokenTrie::allowed(Matcher& m, Matcher::State s, std::vector<uint64_t>& bits) const {
  bits.assign((bytes_.size() + 63) / 64, 0);
  if (s == Matcher::kDead) return;
  std::vector<Matcher::State> states(max_depth_ + 1);
  states[0] = s;
  Run run(m, s);
  const size_t n = nodes_.size() - 1;  // without the sentinel
  for (size_t i = 1; i < n;) {
    const Node& node = nodes_[i];
    const Matcher::State t = m.step(states[node.depth - 1], node.byte);
    if (t == Matcher::kDead) {
      i = node.end;
      continue;
    }
    const size_t d = node.depth, h = node.height;
    if (node.end - i >= kMinSubtree && d + h <= kMaxRun && run.reach(d + h) && run.state(d) == t &&
        (node.below & ~run.classes(d, h)) == 0) {
      // Every string below follows the run, alive: the whole subtree is allowed.
      for (uint32_t k = node.tokens; k < nodes_[node.end].tokens; ++k) {
        const auto id = uint32_t(tokens_[k]);
        bits[id >> 6] |= uint64_t(1) << (id & 63);
      }
      i = node.end;
      continue;
    }
    states[node.depth] = t;
    for (uint32_t k = node.tokens; k < nodes_[i + 1].tokens; ++k) {
      const auto id = uint32_t(tokens_[k]);
      bits[id >> 6] |= uint64_t(1) << (id & 63);
    }
    ++i;
  }
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar,
                                     std::shared_ptr<const TokenTrie> trie,
                                     std::vector<int32_t> end_tokens)
    : trie_(std::move(trie)), end_tokens_(std::move(end_tokens)), matcher_(std::move(grammar)) {
  TKV_CHECK(trie_);
  for (int32_t t : end_tokens_)
    if (t < 0 || t >= trie_->n_vocab())
      fail("grammar: end token ", t, " is outside the vocabulary");
  state_ = matcher_.start();
}

const std::vector<uint64_t>& GrammarConstraint::allowed() {
  const auto it = masks_.find(state_);
  if (it != masks_.end()) return it->second;
  if (masks_.size() >= kMaxCachedMasks) masks_.clear();
  std::vector<uint64_t>& bits = masks_[state_];
  trie_->allowed(matcher_, state_, bits);
  if (matcher_.accepting(state_))
    for (int32_t t : end_tokens_) bits[size_t(t) >> 6] |= uint64_t(1) << (t & 63);
  return bits;
}

void GrammarConstraint::mask(float* logits, int n_vocab) {
  if (n_vocab != trie_->n_vocab())
    fail("grammar: ", n_vocab, " logits for a vocabulary of ", trie_->n_vocab());
  const std::vector<uint64_t>& bits = allowed();
  bool any = false;
  constexpr float kOff = -std::numeric_limits<float>::infinity();
  for (size_t w = 0; w < bits.size(); ++w) {
    any |= bits[w] != 0;
    const size_t base = w * 64;
    const size_t count = std::min<size_t>(64, size_t(n_vocab) - base);
    if (bits[w] == ~uint64_t(0) && count == 64) continue;
    for (size_t b = 0; b < count; ++b)
      if (!(bits[w] >> b & 1)) logits[base + b] = kOff;
  }
  if (!any) fail("grammar: no token of the vocabulary can continue the output here");
}

void GrammarConstraint::accept(int32_t token) {
  if (std::find(end_tokens_.begin(), end_tokens_.end(), token) != end_tokens_.end()) return;
  if (token < 0 || token >= trie_->n_vocab())
    fail("grammar: token ", token, " is outside the vocabulary");
  const Matcher::State next = matcher_.advance(state_, trie_->bytes(token));
  if (next == Matcher::kDead) fail("grammar: token ", token, " does not continue the output");
  const size_t states = matcher_.state_count();
  state_ = matcher_.compact(next, kMaxCachedStates);
  if (matcher_.state_count() < states) masks_.clear();  // the ids were renumbered
}

}  // namespace tkv::grammar
