// The prefix cache over compressed pages: sequences that finished keep
// their pages here, indexed by the hash chain of their page-aligned token
// blocks (prefix_index.h). A new job whose prompt starts with a cached
// prefix forks that sequence (KvCache::fork: every page shared,
// copy-on-write), truncates the fork to the reuse point and prefills only
// the rest of its prompt.
//
// The reuse point is a multiple of the scheduler's prefill grid and at most
// prompt_len - 1 (the last prompt token is always evaluated: its logits
// pick the first reply token), so the remaining chunks fall on the same grid
// as a cold prefill's.
//
// Bit-exactness. A reused prefix gives exactly the logits of a cold prefill
// when its tokens were themselves prefilled on the grid as a prompt and the
// codecs keep no f16 ring (f16 pages, no residual window). It does not when
//  - the prefix holds generated tokens (decoded one at a time: the decode
//    path's matvec kernels differ from the prefill GEMM in the last bits);
//  - its quantized tokens near the reuse point had already left the
//    residual ring (KvCache::truncate: they stay in their codec form where a
//    cold prefill would still hold them in f16).
// Either way the reuse is a valid cache of those tokens, within the codec's
// own error; only the last bits differ.
//
// Eviction is LRU (a hit refreshes its entry). An evicted entry is written
// to the disk tier first when there is one (cache_dir.h) and no file there
// holds its tokens yet, by the background writer when there is one
// (cache_writer.h: the entry's pages stay held until its file is written);
// its pages return to the pool once no running sequence shares them.
//
// Window-policy configs (KvConfig::window > 0) are never cached: their
// sequences free the pages that leave the window, so a prefix of them no
// longer exists to be reused (and truncate refuses to go back there).
//
// Owned by the scheduler's worker thread: not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "runtime/generation.h"
#include "server/cache_dir.h"
#include "server/cache_writer.h"
#include "server/prefix_index.h"

namespace tkv::server {

class PrefixCache {
 public:
  using NewSession = std::function<std::unique_ptr<runtime::InferenceSession>()>;
  // `grid`: reuse points are multiples of it; at most `max_entries` are
  // kept (the least recently used go beyond it); `disk` may be null (no
  // disk tier). With a `writer`, entries go to the disk tier through it
  // (in the background) instead of being written by the calling thread.
  PrefixCache(int block_tokens, int grid, int max_entries, CacheDir* disk,
              CacheWriter* writer = nullptr);
  ~PrefixCache();

  struct Hit {
    runtime::InferenceSession* session = nullptr;  // to fork; null: no reuse
    int64_t reuse = 0;       // prompt tokens to keep (truncate the fork to this)
    bool from_disk = false;  // the entry was just read back from the disk tier
  };
  // The entry giving the longest reuse of `prompt`, from memory or, when the
  // disk tier has a longer one, read back into a sequence from `make` (then
  // kept in memory). A hit refreshes the entry's LRU age. kv::KvBudgetExceeded
  // from reading a file back passes through (nothing changed).
  Hit find(std::span<const int32_t> prompt, const NewSession& make);

  // Keeps a finished sequence. Entries holding a prefix of its tokens are
  // dropped (it serves every prompt they would); a sequence that an entry
  // already holds (the same tokens or more after them) or shorter than one
  // block is dropped instead.
  void insert(std::unique_ptr<runtime::InferenceSession> session);
  // Drops the least recently used entry (to disk first, see above); false
  // when there is none.
  bool evict_lru();
  // Writes every entry the disk tier does not hold yet to it (drain); with
  // a writer, hands every entry to it, waits until they are written and is
  // left empty.
  void persist_all();
  void clear();

  int size() const { return int(entries_.size()); }
  // Pool bytes only the entries hold (what evicting all of them frees now).
  uint64_t exclusive_bytes() const;
  uint64_t disk_loads() const { return disk_loads_; }
  uint64_t evictions() const { return evictions_; }  // evict_lru() calls that dropped one

 private:
  struct Entry {
    std::unique_ptr<runtime::InferenceSession> session;
    uint64_t last_use = 0;
  };
  int64_t reuse_point(int64_t common, size_t prompt_len) const;
  void remove(uint64_t id);

  PrefixIndex index_;
  int grid_;
  int max_entries_;
  CacheDir* disk_;
  CacheWriter* writer_;
  std::map<uint64_t, Entry> entries_;
  uint64_t next_id_ = 1;
  uint64_t clock_ = 0;
  uint64_t disk_loads_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace tkv::server
