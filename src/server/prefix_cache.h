// The prefix cache over compressed pages: checkpoints of prompts' sequences,
// indexed by the hash chain of their page-aligned token blocks
// (prefix_index.h). A new job whose prompt starts with a cached checkpoint
// forks it (KvCache::fork: every page shared, copy-on-write) and prefills
// only the rest of its prompt.
//
// Exactness. A reused prefix is exactly the state a cold prefill of the
// same tokens builds, so a cached prefix never changes an answer
// (ReuseRule, prefix_index.h). The scheduler makes that hold by caching
// checkpoints, not finished sequences: a prompt's sequence forked at a
// boundary of the prefill grid, before the chunk starting there ran (at the
// prompt's last boundary, and where it parted from a cached prompt). A
// finished sequence is not cached: its generated tokens were decoded one at
// a time (other kernels than the prefill's, in the last bits) and, with a
// residual ring, its last prompt tokens have left the ring for their codec.
// Checkpoints differ only in their sinks, ring and last page; the rest of
// their pages are shared. Where reuse need not be exact (ReuseRule::exact
// false) prompts leave a checkpoint at their end too, and finished
// sequences are kept where they can be cut (Scheduler::Impl::keep_finished).
//
// Eviction is LRU (a hit refreshes its entry). An evicted entry is written
// to the disk tier first when there is one (cache_dir.h) and no file there
// serves its prompts yet, by the background writer when there is one
// (cache_writer.h: the entry's pages stay held until its file is written);
// its pages return to the pool once no running sequence shares them.
//
// Whole prompts. A prompt prefilled as one chunk (off the grid: scheduler.h,
// whole_prompt_tokens) has no checkpoint a longer prompt could reuse
// exactly, and is often shorter than a block. Its sequence is kept whole
// instead, with the logits after its last token (insert_whole): the same
// prompt again forks it and samples from those logits, prefilling nothing,
// the bits of a cold prefill. Such an entry serves that prompt only; it
// counts and is evicted like the others, but never goes to the disk tier.
// Its logits (4 bytes a vocabulary entry) are outside the pool's budget:
// at most kMaxWholeEntries are kept, the least recently used go first.
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
#include <unordered_map>
#include <vector>

#include "runtime/generation.h"
#include "server/cache_dir.h"
#include "server/cache_writer.h"
#include "server/prefix_index.h"

namespace tkv::server {

class PrefixCache {
 public:
  static constexpr size_t kMaxWholeEntries = 64;

  using NewSession = std::function<std::unique_ptr<runtime::Sequence>()>;
  // `rule`: where an entry may be reused; at most `max_entries` are kept
  // (the least recently used go beyond it); `disk` may be null (no disk
  // tier). With a `writer`, entries go to the disk tier through it (in the
  // background) instead of being written by the calling thread.
  PrefixCache(int block_tokens, ReuseRule rule, int max_entries, CacheDir* disk,
              CacheWriter* writer = nullptr);
  ~PrefixCache();

  struct Hit {
    runtime::Sequence* session = nullptr;  // to fork; null: no reuse
    int64_t reuse = 0;                     // prompt tokens to keep (truncate the fork to this)
    bool from_disk = false;                // the entry was just read back from the disk tier
    // The grid boundary (at most the prompt's last token) up to which the
    // prompt shares its tokens with the longest-matching entry, reusable or
    // not: where a checkpoint of this prompt would serve the prompts after
    // it that part there too.
    int64_t shared = 0;
  };
  // The entry giving the longest reuse of `prompt`, from memory or, when the
  // disk tier has a longer one and `read_disk`, read back into a sequence
  // from `make` (then kept in memory). A hit refreshes the entry's LRU age.
  // kv::KvBudgetExceeded from reading a file back passes through (nothing
  // changed).
  Hit find(std::span<const int32_t> prompt, const NewSession& make, bool read_disk = true);

  struct WholeHit {
    runtime::Sequence* session = nullptr;  // null: no entry holds the prompt
    std::vector<float> logits;             // after its last token
  };
  // The whole-prompt entry of exactly `prompt` (a hit refreshes its age).
  WholeHit find_whole(std::span<const int32_t> prompt);
  // Keeps a whole prompt's sequence and its logits (see above); replaces an
  // entry of the same prompt.
  void insert_whole(std::unique_ptr<runtime::Sequence> session, std::vector<float> logits);

  // Keeps a checkpoint. Entries it serves every prompt of (ReuseRule::
  // serves) are dropped; one that an entry already serves every prompt of,
  // or shorter than one block, is dropped instead.
  void insert(std::unique_ptr<runtime::Sequence> session);
  const ReuseRule& rule() const { return rule_; }
  // Takes the entry holding `session` (a Hit's) out of the cache, for a job
  // that cannot afford a fork of it.
  std::unique_ptr<runtime::Sequence> take(const runtime::Sequence* session);
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
    std::unique_ptr<runtime::Sequence> session;
    uint64_t last_use = 0;
    std::vector<float> logits;  // a whole-prompt entry's (empty: a checkpoint)
  };
  void remove(uint64_t id);
  // Out of the index it is filed in (the hash chain, or the whole prompts').
  void unindex(uint64_t id, const Entry& e);
  static uint64_t prompt_hash(std::span<const int32_t> tokens);

  PrefixIndex index_;
  ReuseRule rule_;
  int max_entries_;
  CacheDir* disk_;
  CacheWriter* writer_;
  std::map<uint64_t, Entry> entries_;
  std::unordered_map<uint64_t, std::vector<uint64_t>> whole_;  // prompt hash -> ids
  uint64_t next_id_ = 1;
  uint64_t clock_ = 0;
  uint64_t disk_loads_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace tkv::server
