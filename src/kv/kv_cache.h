// The paged, compressed KV store of one sequence: THE ONLY place K and V live.
//
// Each layer has its own geometry (KvShape::layer: query heads, KV heads, K
// and V head dims); its pages, f16 areas and codecs are sized by it.
// Per layer, the tokens of the sequence are held in three parts:
//   sinks    : the first S tokens, f16, forever;
//   pages    : fixed-size pages of codec-encoded vectors (all KV heads of the
//              layer; K and V each in their codec's layout), from the pool;
//   residual : the newest R tokens in f16 (KIVI); a token leaving the
//              residual window is encoded into the current page.
// With a window policy, pages whose tokens all fall outside sinks + the newest
// W tokens are returned to the pool, and attention masks the rest.
//
// The model drives it one chunk at a time (prefill chunks of up to ubatch
// tokens, or a single decode token):
//   cache.begin_chunk(T);
//   for each layer: cache.write(layer, k, v); cache.attend(layer, q, out, pool);
//   cache.end_chunk();
// attend() computes causal attention for the chunk's queries directly on the
// packed pages, with per-query policy semantics (query i sees the residual
// window ending at i in f16, exactly as if decoded token by token). Scratch
// is bounded by chunk x tile, independent of the context length.
//
// Threads: one sequence is driven by one thread at a time; different
// sequences, even sharing a pool and pages, may run on different threads at
// once (each attend() with its own AttentionScratch).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "kv/attention_scratch.h"
#include "kv/kv_config.h"
#include "kv/page_pool.h"

namespace tkv::kv {

// What a model's attention adds to plain softmax(q.k / sqrt(k_dim)) v.
struct AttendOptions {
  // nullptr, or the layer's n_heads learned sink logits (gpt-oss): head h's
  // softmax denominator gains exp(sinks[h]) once, as if one more key scored
  // sinks[h] with a zero value.
  const float* sinks = nullptr;
  // > 0: each score s becomes softcap * tanh(s / softcap) before the
  // softmax (gemma2's attn_logit_softcapping). Monotonic, so query-aware
  // page selection ranks pages by their bound on q.k as without it.
  float softcap = 0.0f;
  // Later layers of the model read this layer's K/V in the same chunk
  // (gemma4's KV-shared layers): the layer stays open, and each further
  // attend(layer, ...) sees exactly what this one saw; the last reader
  // passes false, which ends the layer's chunk.
  bool more_readers = false;
};

// The attention geometry of one layer's K/V: its queries' heads, its KV
// heads and their head dims (K's is also the queries'), and the model's
// sliding window where the layer has one.
struct KvLayerShape {
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // GQA: n_heads % n_kv_heads == 0
  int k_dim = 0;       // head dim of K and of the queries
  int v_dim = 0;       // head dim of V and of the attention output
  // The model's window (Gemma, gpt-oss): a query at position p sees only
  // positions > p - window, the sinks included; 0 = every earlier position.
  // Unlike KvConfig::window (a memory policy that evicts), the layer keeps
  // its whole history in pages (fork, truncate and reuse work at any
  // position); attention reads only the pages the window intersects, and
  // the layer keeps no page summaries (nothing selects there).
  int window = 0;
  bool operator==(const KvLayerShape&) const = default;
};

// What a sequence holds: n_layers layers of K/V, each of its own geometry,
// and a context limit. Uniform (every layer n_heads / n_kv_heads /
// head_dim, K and V alike): KvShape{n_layers, n_heads, n_kv_heads,
// head_dim, max_tokens}. Per layer: KvShape::of_layers(layers, max_tokens),
// which sets the scalar fields to the largest over the layers (what a
// caller sizing one buffer for any layer needs); layer(l) is what layer l
// holds either way.
struct KvShape {
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // GQA: n_heads % n_kv_heads == 0
  int head_dim = 0;
  int max_tokens = 0;  // context limit; write beyond it is an error
  // Empty: every layer is {n_heads, n_kv_heads, head_dim, head_dim}; else
  // n_layers entries.
  std::vector<KvLayerShape> layers;
  // Recurrent layers (a hybrid model's Gated DeltaNet layers; they keep no
  // K/V and are not among the n_layers above): the floats of each one's
  // state, in the model's layer order (recurrent_state.h). Empty for models
  // of attention layers only.
  std::vector<int64_t> recurrent;

  KvShape() = default;
  KvShape(int n_layers_, int n_heads_, int n_kv_heads_, int head_dim_, int max_tokens_)
      : n_layers(n_layers_),
        n_heads(n_heads_),
        n_kv_heads(n_kv_heads_),
        head_dim(head_dim_),
        max_tokens(max_tokens_) {}
  static KvShape of_layers(std::vector<KvLayerShape> layers, int max_tokens);

  KvLayerShape layer(int l) const {
    return layers.empty() ? KvLayerShape{n_heads, n_kv_heads, head_dim, head_dim}
                          : layers[size_t(l)];
  }
  // Every layer has the scalar fields' geometry, K and V alike.
  bool uniform() const;
  // The same layers (geometry, windows, recurrent states), whatever the
  // context limit.
  bool same_layers(const KvShape& o) const;
  bool operator==(const KvShape& o) const;
};

struct KvStats {
  int64_t n_tokens = 0;           // positions consumed so far
  int64_t tokens_kept = 0;        // tokens attention can still see (per layer)
  uint64_t persistent_bytes = 0;  // sinks + allocated pages + residual + summaries, all layers
  uint64_t page_bytes = 0;        // of which pages
  uint64_t f16_bytes = 0;         // of which sinks + residual
  uint64_t summary_bytes = 0;     // of which page summaries (only with page selection)
  uint64_t state_bytes = 0;       // of which recurrent layers' states (KvShape::recurrent)
  uint64_t snapshot_bytes = 0;    // of which their snapshots (KvCache::snapshot)
  int snapshots = 0;              // snapshots held
  // Of page_bytes, what is on disk now and not in RAM (the pool's disk tier).
  uint64_t page_bytes_on_disk = 0;
  // persistent_bytes split by ownership: pages this sequence shares with
  // others (fork) and what only it holds (its own pages, sinks, residual).
  uint64_t shared_bytes = 0;
  uint64_t exclusive_bytes = 0;
  std::vector<uint64_t> layer_bytes;
  // Attention scratch this sequence holds: the chunk's f16 tokens plus the
  // scratch of attend() calls made without an AttentionScratch. A caller
  // passing its own AttentionScratch accounts that one itself.
  uint64_t scratch_bytes = 0;       // now held
  uint64_t peak_scratch_bytes = 0;  // high-water mark since construction / reset_peak()
  int64_t pages_allocated = 0;
  // Page selection, since construction: key tiles of pages read (a 64-token
  // page is one tile; counted per KV head and query tile) by the layers that
  // select, and what dense attention would have read in the same calls.
  // Their ratio is the fraction of the pages' bytes attention read.
  int64_t select_page_reads = 0;
  int64_t select_dense_page_reads = 0;
  // Bytes of pages attention has read since construction, every layer (a
  // page counted once per layer and chunk): what a window layer's window or
  // a selecting layer's choice left of its pages.
  uint64_t page_bytes_read = 0;
  double k_bytes_per_token_head = 0;  // of the main codec (layer 0)
  double v_bytes_per_token_head = 0;
};

// What a caller stores in a session file next to the KV store: the
// sequence's token ids and named byte strings (any bytes, not necessarily
// UTF-8; e.g. the chat transcript, the sampler state).
struct SessionMeta {
  std::vector<int32_t> tokens;
  std::map<std::string, std::string> strings;
  bool operator==(const SessionMeta&) const = default;
};

class KvCache {
 public:
  // A sequence with a private pool of config.budget_bytes (and a disk tier
  // in config.spill_dir when set; KvSpillError when it cannot be used).
  KvCache(const KvShape& shape, const KvConfig& config);
  // A sequence whose pages, sinks and residual ring come from `pool`, which
  // any number of sequences (on any threads) may share; config.budget_bytes
  // is not used (the pool has the budget). Throws KvBudgetExceeded when the
  // pool cannot hold the sinks and residual ring.
  KvCache(const KvShape& shape, const KvConfig& config, std::shared_ptr<PagePool> pool);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvShape& shape() const;
  const KvConfig& config() const;
  int64_t n_tokens() const;  // next position to be written
  // Tokens that may still be appended: shape().max_tokens - n_tokens(), or
  // INT64_MAX under a window policy (memory stays flat, so the sequence may
  // outgrow the context). begin_chunk refuses a chunk larger than this; it is
  // the one place the window-policy context rule is decided.
  int64_t room() const;
  const std::shared_ptr<PagePool>& pool() const;

  // Allocates every page the chunk will fill; throws KvBudgetExceeded (and
  // changes nothing) when the pool's budget does not allow it.
  // With the pool's disk tier, write() and attend() read pages back from
  // disk and may throw KvSpillError (disk full, I/O error, checksum
  // mismatch) or KvBudgetExceeded (the pages one step needs at once do not
  // fit); the chunk is then lost and the sequence must be cleared (or
  // destroyed) before it is used again.
  void begin_chunk(int n_new);
  // k: n_new x n_kv_heads x k_dim, v: n_new x n_kv_heads x v_dim (the
  // layer's, shape().layer(layer); RoPE already applied to k). With a pool,
  // encoding runs on its threads (page-by-head tasks).
  void write(int layer, const float* k, const float* v, ThreadPool* pool = nullptr);
  // q: n_new x n_heads x k_dim (unscaled; scores are scaled by
  // 1/sqrt(k_dim)); out: n_new x n_heads x v_dim. Uses a scratch inside the
  // cache (one attend at a time per cache).
  void attend(int layer, const float* q, float* out, ThreadPool& pool,
              const AttendOptions& options = {});
  // The same with the caller's scratch (attention_scratch.h): sequences on
  // different threads each pass their own. Results are bit-identical to the
  // overload above.
  void attend(int layer, const float* q, float* out, ThreadPool& pool, AttentionScratch& scratch,
              const AttendOptions& options = {});
  void end_chunk();

  // Recurrent layer r's state (KvShape::recurrent[r] floats, laid out as the
  // model's layer defines it). The model reads and updates it in place
  // between begin_chunk and end_chunk (begin_chunk has made it private when
  // a fork shared it); outside a chunk it is read-only by convention.
  float* state(int r);
  const float* state(int r) const;
  // Brings state r into RAM for as long as the result lives (a chunk's
  // update of it; with the pool's disk tier it may be on disk otherwise):
  // KvSpillError or KvBudgetExceeded as a page's pin.
  PagePins pin_state(int r);
  // Keeps the recurrent states as they are now (at n_tokens()) so that
  // truncate() can come back here: KvConfig::state_snapshots are kept (the
  // newest two, and of the older ones those that stay spread out). It
  // shares the states (nothing copied until the next chunk updates them,
  // copy-on-write), so taking one costs a state's bytes once the sequence
  // goes on. No-op without recurrent layers, or with one here already.
  void snapshot();
  // The largest position <= n that truncate() can reach: n itself where the
  // cache can be cut anywhere (can_truncate), else the newest snapshot at or
  // before n (recurrent layers), else 0.
  int64_t restore_point(int64_t n) const;

  // A new sequence in the same pool holding the same tokens: it shares every
  // page and recurrent state (refcounted, nothing copied) and has its own
  // copy of the sinks and residual ring. Either sequence may then go on with different tokens: a
  // shared page about to be written (the partly filled last one) is copied
  // first, in begin_chunk (copy-on-write). Throws KvBudgetExceeded (this
  // sequence unchanged) when the pool cannot hold the new sinks and ring.
  std::unique_ptr<KvCache> fork() const;
  // Keeps positions [0, n) and drops the rest (regenerate a reply, edit a
  // turn): pages wholly at or beyond n go back to the pool. Unlike a fresh
  // prefill of the same n tokens, positions within R of n that had already
  // left the residual window stay in their codec form (the ring keeps only
  // those it still held); new tokens then enter the ring as usual. Under a
  // window policy, truncating to a point whose window reaches evicted
  // positions is an error (nothing changes). n > n_tokens() is an error.
  // With recurrent layers only n_tokens() (nothing to do), 0 (the empty
  // sequence) and a snapshot's position (its states restored; later
  // snapshots dropped) are possible: a state holds no other position.
  void truncate(int64_t n);
  // Whether truncate(n) is possible (the checks above).
  bool can_truncate(int64_t n) const;
  void clear();  // back to an empty sequence, pages returned
  // After write() or attend() threw (the disk tier's KvSpillError, or
  // KvBudgetExceeded when a step's pages do not fit at once): ends the lost
  // chunk and clears the sequence, which is then empty and usable.
  void abandon_chunk();
  // Appends `n` tokens of synthetic K/V without running attention, for
  // benchmarks and tests that need a deep sequence fast (a real 64K-token
  // prefill costs quadratic attention; this costs only the encoding).
  // Keys and values are N(0, 1) per element from a fixed generator: the
  // value of (layer, position, K or V, head, dim) depends only on `seed` and
  // those indices, never on chunking or threads. They go through the real
  // chunk protocol (begin_chunk / write, the residual ring updated as after
  // attend, end_chunk): pages encoded by the layer's codec, page summaries
  // computed, the pool's budget and disk tier apply. Chunks of 512 tokens,
  // encoded on `pool` when given. Throws what begin_chunk and write throw.
  void fill_synthetic(int64_t n, uint64_t seed, ThreadPool* pool = nullptr);
  KvStats stats() const;
  void reset_peak_scratch();

  // Persistence (docs/KV_FORMAT.md): one GGUF file with a format version,
  // the model fingerprint, the KV settings, the caller's SessionMeta and an
  // XXH3-64 checksum over every other byte of the file; pages are streamed
  // from the pool to the file, and the file appears atomically. Files of
  // version 1 (no SessionMeta) are still read; other versions are refused
  // with a message naming theirs.
  void save(const std::string& path, const std::string& model_fingerprint,
            const SessionMeta& meta) const;
  void save(const std::string& path, const std::string& model_fingerprint) const;  // no meta
  // Transactional: every check (checksum, fingerprint, shape, settings, page
  // table) and every page allocation happen before the sequence changes; on
  // any tkv::Error (KvBudgetExceeded when the pool cannot hold the pages
  // next to the ones the sequence holds now) it is exactly as it was.
  // Returns the SessionMeta saved with it (empty for version 1).
  SessionMeta load(const std::string& path, const std::string& model_fingerprint);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tkv::kv
