// The state of one conversation with a model, shared by every front end: the
// KV cache (the only copy of the past), the token ids it holds, the logits of
// the newest token, and the generation loop that samples from them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace tkv::runtime {

// Watches a prefill: called at the start of every feed() of more than one
// token with the number of tokens, it returns the callback told, after each
// chunk, how many are done (or an empty function). What it returns is
// destroyed when the feed ends (a progress bar closes its line then).
using PrefillObserver = std::function<std::function<void(int64_t done)>(int64_t total)>;

class InferenceSession {
 public:
  // A cache of `ctx` tokens with `kv` settings; throws tkv::Error for
  // settings the cache rejects (bad page size, override of a missing layer).
  // The cache has a private page pool of kv.budget_bytes and the session
  // its own thread pool of `threads`.
  InferenceSession(const model::Model& model, const tok::Tokenizer& tokenizer, int ctx,
                   const kv::KvConfig& kv, int threads, int ubatch);
  // A sequence of an engine: pages from the shared `pages` pool (which has
  // the budget), compute on the shared `threads` (one feed at a time on it).
  // KvBudgetExceeded when the pool cannot hold the sinks and residual ring.
  InferenceSession(const model::Model& model, const tok::Tokenizer& tokenizer, int ctx,
                   const kv::KvConfig& kv, std::shared_ptr<kv::PagePool> pages, ThreadPool& threads,
                   int ubatch);
  InferenceSession(const InferenceSession&) = delete;
  InferenceSession& operator=(const InferenceSession&) = delete;

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

  // Evaluates `tokens` after the current ones (prefill chunks of ubatch) and
  // keeps the logits of the last, showing progress as set_prefill_progress()
  // says. tkv::Error, before any change, if they do not fit the context.
  void feed(std::span<const int32_t> tokens);
  // Logits predicting the token after tokens().back(); empty before the
  // first feed and right after restore().
  const std::vector<float>& logits() const { return logits_; }

  // After Model::eval_batch appended `tokens` to cache() (feed_batch,
  // runtime/batch.h): records them, and `last_logits` when not empty.
  void record_fed(std::span<const int32_t> tokens, std::span<const float> last_logits);

  // Forgets everything (empty cache and history).
  void clear();
  // A new session holding the same tokens, sharing every page of the cache
  // (copy-on-write, KvCache::fork) and this session's pools. Its logits are
  // empty until its first feed. KvBudgetExceeded, this session unchanged,
  // when the pool cannot hold the new sinks and ring.
  std::unique_ptr<InferenceSession> fork() const;
  // Keeps the first n tokens (KvCache::truncate); the logits are cleared.
  void truncate(int64_t n);
  // After cache().load(): the ids the restored cache holds.
  void restore_tokens(std::vector<int32_t> tokens);

 private:
  InferenceSession(const InferenceSession& from, std::unique_ptr<kv::KvCache> cache);

  const model::Model& model_;
  const tok::Tokenizer& tokenizer_;  // outlives the session (the caller's)
  std::unique_ptr<kv::KvCache> cache_;
  std::unique_ptr<ThreadPool> own_threads_;  // null when the threads are shared
  ThreadPool* threads_;
  int ubatch_;
  PrefillObserver observer_;
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;
  int64_t context_size_;
};

enum class StopReason {
  kLength,       // -n tokens generated
  kEndOfText,    // an end-of-generation token was sampled (not fed, not shown)
  kStopString,   // on_token asked to stop (a stop string matched)
  kContextFull,  // no room to feed the last sampled token
  kInterrupted,  // the interrupt flag was raised (Ctrl-C)
  kCancelled,    // generate_text's on_text returned false
};
const char* stop_reason_name(StopReason reason);

struct GenerateOptions {
  int64_t max_tokens = -1;  // < 0: no limit (until EOG or the context is full)
  bool stop_at_eog = true;  // false: --ignore-eos
  // More tokens that end the reply like EOG ones (a chat template's end-of-turn
  // markers); ignored with stop_at_eog = false.
  std::vector<int32_t> stop_tokens;
  const std::atomic<bool>* interrupt = nullptr;
};

struct GenerateResult {
  StopReason reason = StopReason::kLength;
  int64_t n_generated = 0;         // tokens sampled and handed to on_token
  int64_t n_decoded = 0;           // tokens fed back through the model (single-token evals)
  double decode_seconds = 0;       // time in those evals
  double first_token_seconds = 0;  // from the call until the first token was handed out
};

// Samples from session.logits(), hands each token to `on_token`, feeds it
// back and repeats. on_token returns false to stop (that token is then not
// fed). An EOG token (unless ignored) ends the loop without being handed out
// or fed. The sampler accepts every sampled token. Requires logits().
GenerateResult generate(InferenceSession& session, sample::Sampler& sampler,
                        const GenerateOptions& options,
                        const std::function<bool(int32_t token)>& on_token);

struct TextGenerateResult {
  GenerateResult generation;
  std::string stop_string;  // the stop string that ended it (generation.reason kStopString)
};

// generate() as text: each token goes through `decoder` (the streaming
// detokenizer: text appears once its bytes form whole characters, spelled
// as in the decoded whole) and the stop strings (held back while they could
// still be starting, never shown, even across token boundaries); on_text
// receives the text that is safe to show and returns false to cancel
// (reason kCancelled; the token whose text it was is not fed). What the
// decoder and the stop matcher still hold is handed out at the end.
TextGenerateResult generate_text(InferenceSession& session, sample::Sampler& sampler,
                                 const GenerateOptions& options,
                                 const std::vector<std::string>& stops, tok::StreamDecoder& decoder,
                                 const std::function<bool(std::string_view text)>& on_text);

}  // namespace tkv::runtime
