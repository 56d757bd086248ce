#include "server/prefix_index.h"

#include <algorithm>
#include <unordered_set>

#include "common/error.h"

namespace tkv::server {

namespace {

// splitmix64's finalizer: every input bit reaches every output bit.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  return int64_t(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
}

int64_t ReuseRule::boundary(int64_t common, int64_t prompt_len) const {
  return std::max<int64_t>(0, std::min(common, prompt_len - 1)) / grid * grid;
}

int64_t ReuseRule::point(int64_t held_len, int64_t common, int64_t prompt_len) const {
  const int64_t at =
      exact ? boundary(common, prompt_len) : std::max<int64_t>(0, std::min(common, prompt_len - 1));
  // Whole: `at` reaching held_len means every held token is shared.
  return truncatable || at == held_len ? at : 0;
}

bool ReuseRule::serves(std::span<const int32_t> a, std::span<const int32_t> b) const {
  if (b.size() > a.size() || common_prefix(a, b) != int64_t(b.size())) return false;
  return truncatable || a.size() == b.size();
}

PrefixIndex::PrefixIndex(int block_tokens) : block_(block_tokens) {
  TKV_CHECK(block_tokens >= 1);
}

std::vector<uint64_t> PrefixIndex::chain(std::span<const int32_t> tokens) const {
  std::vector<uint64_t> hashes;
  uint64_t h = 0x7475726b6f6b76ull;  // any fixed start
  for (size_t end = size_t(block_); end <= tokens.size(); end += size_t(block_)) {
    for (size_t i = end - size_t(block_); i < end; ++i) h = mix(h ^ uint32_t(tokens[i]));
    hashes.push_back(h);
  }
  return hashes;
}

void PrefixIndex::add(uint64_t id, std::span<const int32_t> tokens) {
  for (uint64_t h : chain(tokens)) ids_[h].push_back(id);
}

void PrefixIndex::remove(uint64_t id, std::span<const int32_t> tokens) {
  for (uint64_t h : chain(tokens)) {
    auto it = ids_.find(h);
    if (it == ids_.end()) continue;
    std::erase(it->second, id);
    if (it->second.empty()) ids_.erase(it);
  }
}

std::vector<uint64_t> PrefixIndex::candidates(std::span<const int32_t> prompt) const {
  const std::vector<uint64_t>*first = nullptr, *deepest = nullptr;
  for (uint64_t h : chain(prompt)) {
    const auto it = ids_.find(h);
    if (it == ids_.end()) break;
    if (!first) first = &it->second;
    deepest = &it->second;
  }
  if (!first) return {};
  // Every sharer is filed under the first block (an id filed under a block
  // is filed under each one before it): those under the deepest come first.
  std::vector<uint64_t> out = *deepest;
  if (deepest != first) {
    const std::unordered_set<uint64_t> deep(deepest->begin(), deepest->end());
    for (uint64_t id : *first)
      if (!deep.count(id)) out.push_back(id);
  }
  return out;
}

}  // namespace tkv::server
