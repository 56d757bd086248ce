// One conversation with a model: the runtime object every driver feeds --
// `turbokv run`, `chat` and `bench` (generate(), generation.h), the C and
// C++ APIs, batches (feed_batch) and the server's scheduler.
//
// A Sequence owns everything one conversation has:
//   memory     its per-layer memory (the KV cache: the only copy of the past)
//   tokens     the ids fed so far, and the logits after the newest
//   input      tokens queued to be fed by a driver that feeds in steps, and
//              the prefill chunk in progress when it runs in layer parts
//   sampler    kept across replies (a chat's repetition history goes on)
//   reply      the reply being generated: its limits and stop rules
//              (reply.h: the one place they live) and its streaming text
// and offers the calls a driver needs:
//   feed(tokens)                        evaluate now (chunks of ubatch)
//   queue(tokens); next_item(n, stop)   the next batch item, for eval_batch
//   accept(item, status, logits)        what eval_batch did with it
//   sample_next(logits)                 the reply's next token (ReplyRules)
//   fork / truncate / clear / save / load
// A driver that feeds in steps keeps only its policy: which sequences run,
// how many tokens and layers each item takes (admission, budgets, fairness).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/reply.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

namespace tkv::runtime {

// Watches a prefill: called at the start of every feed() of more than one
// token with the number of tokens, it returns the callback told, after each
// chunk, how many are done (or an empty function). What it returns is
// destroyed when the feed ends (a progress bar closes its line then).
using PrefillObserver = std::function<std::function<void(int64_t done)>(int64_t total)>;

class Sequence {
 public:
  // A cache of `ctx` tokens with `kv` settings; throws tkv::Error for
  // settings the cache rejects (bad page size, override of a missing layer).
  // The cache has a private page pool of kv.budget_bytes and the sequence
  // its own thread pool of `threads`.
  Sequence(const model::Model& model, const tok::Tokenizer& tokenizer, int ctx,
           const kv::KvConfig& kv, int threads, int ubatch);
  // A sequence of an engine: pages from the shared `pages` pool (which has
  // the budget), compute on the shared `threads` (one feed at a time on it).
  // KvBudgetExceeded when the pool cannot hold the sinks and residual ring.
  Sequence(const model::Model& model, const tok::Tokenizer& tokenizer, int ctx,
           const kv::KvConfig& kv, std::shared_ptr<kv::PagePool> pages, ThreadPool& threads,
           int ubatch);
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;
  ~Sequence();

  const model::Model& model() const { return model_; }
  const tok::Tokenizer& tokenizer() const { return tokenizer_; }
  kv::KvCache& cache() { return *cache_; }
  const kv::KvCache& cache() const { return *cache_; }
  ThreadPool& pool() { return *threads_; }
  const ThreadPool& pool() const { return *threads_; }
  int ubatch() const { return ubatch_; }
  void set_prefill_observer(PrefillObserver observer) { observer_ = std::move(observer); }

  // Every token fed so far, in order (what the cache has seen).
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Tokens that can still be fed before the context is full; practically
  // unlimited (2^31 positions) under a window policy, which evicts old tokens.
  int64_t room() const;
  // -c; under a window policy the sequence may grow past it (see room()).
  int64_t context_size() const { return context_size_; }
  // Why `n` more tokens do not fit the context ("context full: ..."), or
  // "" when they do.
  std::string no_room_for(int64_t n) const;

  // Evaluates `tokens` after the current ones (prefill chunks of ubatch) and
  // keeps the logits of the last, showing progress as the observer says.
  // tkv::Error, before any change, if they do not fit the context.
  void feed(std::span<const int32_t> tokens);
  // Logits predicting the token after tokens().back(); empty before the
  // first feed and right after truncate() or load().
  const std::vector<float>& logits() const { return logits_; }

  // ---- fed in steps (a scheduler, feed_batch) ----
  // Queues `tokens` to be fed after what the sequence holds and has queued.
  void queue(std::span<const int32_t> tokens);
  std::span<const int32_t> queued() const { return queue_; }
  void clear_queue() { queue_.clear(); }
  // The batch item of the next `n` queued tokens (1 <= n <= queued().size()):
  // logits after the last of the queue, none before it. `layer_stop` runs
  // only the chunk's layers up to there (0: to the end; model/
  // chunk_parts.h): a chunk in layer parts continues from the layers done,
  // its rows' residual stream kept here between the parts; its next item
  // must be the same n tokens.
  model::BatchItem next_item(int64_t n, int layer_stop = 0);
  // Layers of the chunk in progress done so far (0: none in progress).
  int chunk_layers_done() const { return parts_.layers_done(); }
  // After eval_batch ran an item of next_item(): its tokens leave the queue
  // and join tokens() when its last layer ran, and `logits` (when given)
  // become logits(); a driver that samples from the batch's buffer passes
  // none and need not copy them. A failed item changed nothing, except a
  // disk-tier failure part-way (kSpillError), which cleared the sequence and
  // its queue. Returns true when the item completed the queue: logits are
  // ready.
  bool accept(const model::BatchItem& item, const model::ItemStatus& status,
              std::span<const float> logits = {});

  // ---- generation ----
  // The sampler every reply draws from, replaced by set_sampler (which
  // starts a new history and random stream).
  void set_sampler(const sample::SamplerConfig& config);
  sample::Sampler& sampler();
  // Starts a reply (ending one in progress).
  Reply& start_reply(ReplyLimits limits, const ReplyText& text);
  Reply& reply();
  void end_reply() { reply_.reset(); }
  // The reply's next token from `logits` (the logits after the newest
  // token; room() decides "context full"). `consume` sees each counted
  // token and its text (Reply::step). The caller feeds or queues the token
  // unless the step stopped.
  Reply::Step sample_next(std::span<const float> logits,
                          const std::function<bool(int32_t, const std::string&)>& consume = {});

  // ---- the sequence as a whole ----
  // Forgets everything (empty cache, history and queue).
  void clear();
  // A new sequence holding the same tokens, sharing every page of the cache
  // (copy-on-write, KvCache::fork) and this sequence's pools; no logits, no
  // queue, no sampler, no reply. KvBudgetExceeded, this sequence unchanged,
  // when the pool cannot hold the new sinks and ring.
  std::unique_ptr<Sequence> fork() const;
  // Keeps the first n tokens (KvCache::truncate); the logits are cleared.
  // A hybrid model's cache goes back to its newest snapshot at or before n
  // (KvCache::restore_point: feed() takes them at each prompt's start and
  // end) and the tokens from there to n are fed again.
  void truncate(int64_t n);
  // Writes the sequence to a session file (session_state.h: its format,
  // atomicity, and `strings`, the caller's named byte strings).
  void save(const std::string& path, const std::map<std::string, std::string>& strings = {}) const;
  // Restores the sequence from a session file; returns its strings.
  // Transactional: on tkv::Error the sequence is exactly as it was.
  std::map<std::string, std::string> load(const std::string& path);

 private:
  Sequence(const Sequence& from, std::unique_ptr<kv::KvCache> cache);
  void restore_tokens(std::vector<int32_t> tokens);  // after cache().load()

  const model::Model& model_;
  const tok::Tokenizer& tokenizer_;  // outlives the sequence (the caller's)
  std::unique_ptr<kv::KvCache> cache_;
  std::unique_ptr<ThreadPool> own_threads_;  // null when the threads are shared
  ThreadPool* threads_;
  int ubatch_;
  PrefillObserver observer_;
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;
  int64_t context_size_;
  std::vector<int32_t> queue_;
  model::ChunkParts parts_;  // the chunk in progress when it runs in layer parts
  std::optional<sample::Sampler> sampler_;
  std::unique_ptr<Reply> reply_;
};

}  // namespace tkv::runtime
