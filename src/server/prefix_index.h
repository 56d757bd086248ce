// Token-id prefixes indexed by a hash chain over fixed-size blocks (the KV
// page size): h_1 = H(block 1), h_k = H(h_{k-1}, block k). An entry of n
// tokens is filed under h_1 .. h_floor(n/B); a prompt walks its own chain
// and the deepest hash it finds names the entries sharing the most whole
// blocks with it, in O(prompt blocks) whatever the number of entries. A hash
// only proposes: callers confirm with common_prefix() (a collision costs a
// comparison, never a wrong reuse).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace tkv::server {

// Tokens a and b have in common from the start.
int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b);

class PrefixIndex {
 public:
  explicit PrefixIndex(int block_tokens);

  void add(uint64_t id, std::span<const int32_t> tokens);
  void remove(uint64_t id, std::span<const int32_t> tokens);
  // The ids filed under the deepest block hash of `prompt` (empty when its
  // first block matches nothing).
  std::vector<uint64_t> candidates(std::span<const int32_t> prompt) const;
  int block_tokens() const { return block_; }

 private:
  std::vector<uint64_t> chain(std::span<const int32_t> tokens) const;

  int block_;
  std::unordered_map<uint64_t, std::vector<uint64_t>> ids_;  // chain hash -> ids
};

}  // namespace tkv::server
