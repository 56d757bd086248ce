#include "grammar/matcher.h"

#include <algorithm>
#include <utility>

#include "common/error.h"

namespace tkv::grammar {

size_t Matcher::VecHash::operator()(const std::vector<uint32_t>& v) const {
  uint64_t h = 0xcbf29ce484222325ull ^ v.size();
  for (uint32_t x : v) h = (h ^ x) * 0x100000001b3ull + (h >> 29);
  return size_t(h);
}

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  TKV_CHECK(grammar_ && grammar_->root < grammar_->rule_count());
  reset_tables();
}

void Matcher::reset_tables() {
  nodes_.assign(1, Node{0, 0});
  node_ids_.clear();
  states_.clear();
  state_ids_.clear();
  flags_.clear();
  next_.clear();
  seen_.clear();
  epoch_ = 1;
  found_.clear();
  work_.clear();
  const Grammar& g = *grammar_;
  for (uint32_t a : g.alternatives[g.root])
    closure(g.elements[a].kind == Element::kEnd ? 0 : push(0, a), found_);
  start_ = intern(found_);
}

uint32_t Matcher::push(uint32_t parent, uint32_t pos) {
  const uint64_t key = (uint64_t(pos) << 32) | parent;
  const auto [it, added] = node_ids_.emplace(key, uint32_t(nodes_.size()));
  if (added) nodes_.push_back({pos, parent});
  return it->second;
}

void Matcher::closure(uint32_t stack, std::vector<uint32_t>& out) {
  const Grammar& g = *grammar_;
  work_.push_back(stack);
  while (!work_.empty()) {
    const uint32_t s = work_.back();
    work_.pop_back();
    if (seen_.size() < nodes_.size()) seen_.resize(nodes_.size() * 2, 0);
    if (seen_[s] == epoch_) continue;
    seen_[s] = epoch_;
    const Node node = nodes_[s];
    if (s == 0 || g.elements[node.pos].kind == Element::kBytes) {
      out.push_back(s);
      if (out.size() > kMaxStacksPerState)
        fail("grammar: too ambiguous (over ", kMaxStacksPerState, " parses alive at once)");
      continue;
    }
    // A rule reference: its continuation below, then each alternative.
    const uint32_t rest = g.elements[node.pos + 1].kind == Element::kEnd
                              ? node.parent
                              : push(node.parent, node.pos + 1);
    for (uint32_t a : g.alternatives[g.elements[node.pos].value])
      work_.push_back(g.elements[a].kind == Element::kEnd ? rest : push(rest, a));
  }
}

Matcher::State Matcher::intern(std::vector<uint32_t>& stacks) {
  if (stacks.empty()) return kDead;
  std::sort(stacks.begin(), stacks.end());
  const auto it = state_ids_.find(stacks);
  if (it != state_ids_.end()) return it->second;
  const State id = State(states_.size());
  uint8_t flags = 0;
  if (stacks.front() == 0) flags = stacks.size() == 1 ? (kAccepting | kComplete) : kAccepting;
  states_.push_back(stacks);
  state_ids_.emplace(stacks, id);
  flags_.push_back(flags);
  next_.resize(next_.size() + 256, kUnknown);
  return id;
}

Matcher::State Matcher::compute(State s, uint8_t byte) {
  if (s == kDead) return kDead;
  const Grammar& g = *grammar_;
  ++epoch_;
  found_.clear();
  work_.clear();  // a closure that threw (too ambiguous) may have left some
  const std::vector<uint32_t> stacks = states_[s];  // a copy: intern() may grow states_
  for (uint32_t st : stacks) {
    if (st == 0) continue;
    const Node node = nodes_[st];
    if (!g.sets[g.elements[node.pos].value].test(byte)) continue;
    const uint32_t next = node.pos + 1;
    closure(g.elements[next].kind == Element::kEnd ? node.parent : push(node.parent, next), found_);
  }
  const State t = intern(found_);
  next_[size_t(s) * 256 + byte] = t;
  return t;
}

Matcher::State Matcher::advance(State s, std::string_view bytes) {
  for (char c : bytes) {
    if (s == kDead) return kDead;
    s = step(s, uint8_t(c));
  }
  return s;
}

size_t Matcher::memory_bytes() const {
  size_t n = nodes_.size() * sizeof(Node) * 3 + next_.size() * 4 + seen_.size() * 4;
  for (const auto& st : states_) n += st.size() * 4 * 2 + 64;
  return n;
}

Matcher::State Matcher::compact(State keep, size_t limit) {
  if (states_.size() <= limit || keep == kDead) return keep;
  // Each stack of `keep` as its positions, bottom first, then rebuilt.
  std::vector<std::vector<uint32_t>> chains;
  for (uint32_t st : states_[keep]) {
    std::vector<uint32_t> chain;
    for (uint32_t n = st; n != 0; n = nodes_[n].parent) chain.push_back(nodes_[n].pos);
    std::reverse(chain.begin(), chain.end());
    chains.push_back(std::move(chain));
  }
  reset_tables();
  std::vector<uint32_t> stacks;
  for (const auto& chain : chains) {
    uint32_t n = 0;
    for (uint32_t pos : chain) n = push(n, pos);
    stacks.push_back(n);
  }
  return intern(stacks);
}

bool matches(std::shared_ptr<const Grammar> grammar, std::string_view text) {
  Matcher m(std::move(grammar));
  return m.accepting(m.advance(m.start(), text));
}

}  // namespace tkv::grammar
