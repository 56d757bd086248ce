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

// Where a cached sequence may be reused so that the new sequence holds
// exactly what a cold prefill of its prompt would build: the same codec or
// f16 form of every token, the same bits (the prompt's logits follow).
//
// Cached sequences are checkpoints (prefix_cache.h): a prompt's sequence
// forked at a boundary of the prefill grid, before the chunk starting there
// ran, so every token it holds was prefilled in whole grid chunks, as a
// cold prefill of any longer prompt prefills them. A checkpoint serves a
// prompt that starts with all of its tokens and has at least one more (the
// last prompt token is always evaluated). It cannot be truncated when the
// codecs keep a residual ring: a cold prefill at the cut would hold the R
// tokens before it in f16, the checkpoint holds them encoded
// (KvCache::truncate). Without a ring (f16 pages, or residual 0) truncating
// to any grid boundary is exact.
//
// Not exact (SchedulerOptions::exact_reuse false): a sequence is reused up
// to the prompt's last shared token wherever it ends (a prompt's end, a
// finished reply), and cut anywhere where its layers allow it (truncatable:
// with a residual ring the cut keeps the ring's tokens encoded). The reused
// state then differs from a cold prefill's in its last bits.
struct ReuseRule {
  int grid = 1;              // the prefill grid: exact reuse points are multiples of it
  bool truncatable = false;  // a checkpoint serves its prefixes too (exactly: no residual ring)
  bool exact = true;         // reuse only at grid boundaries (see above)

  // The last grid boundary within the first `common` tokens of a prompt of
  // `prompt_len`, short of its last token (which is always evaluated).
  int64_t boundary(int64_t common, int64_t prompt_len) const;
  // Prompt tokens a sequence of `held_len` tokens, `common` of them shared
  // with a prompt of `prompt_len`, gives (0: none).
  int64_t point(int64_t held_len, int64_t common, int64_t prompt_len) const;
  int64_t point(std::span<const int32_t> held, std::span<const int32_t> prompt) const {
    return point(int64_t(held.size()), common_prefix(held, prompt), int64_t(prompt.size()));
  }
  // Whether a sequence holding `a` serves every prompt one holding `b` does.
  bool serves(std::span<const int32_t> a, std::span<const int32_t> b) const;
};

class PrefixIndex {
 public:
  explicit PrefixIndex(int block_tokens);

  void add(uint64_t id, std::span<const int32_t> tokens);
  void remove(uint64_t id, std::span<const int32_t> tokens);
  // The ids filed under any block hash `prompt` shares: first those
  // sharing its longest run of blocks, then the others (a checkpoint that
  // cannot be cut serves only where it is no longer than the shared
  // tokens). Empty when its first block matches nothing.
  std::vector<uint64_t> candidates(std::span<const int32_t> prompt) const;
  int block_tokens() const { return block_; }

 private:
  std::vector<uint64_t> chain(std::span<const int32_t> tokens) const;

  int block_;
  std::unordered_map<uint64_t, std::vector<uint64_t>> ids_;  // chain hash -> ids
};

}  // namespace tkv::server
