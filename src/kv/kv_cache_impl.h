// Internal state of KvCache, shared by kv_cache.cc (bookkeeping),
// attention.cc (the fused attention driver) and kv_persist.cc (save/load).
// Not part of the public API.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "kv/attention_scratch.h"
#include "kv/codec/codec.h"
#include "kv/kv_cache.h"
#include "kv/page_pool.h"
#include "kv/recurrent_state.h"
#include "kv/summary_store.h"

namespace tkv::kv {

// An f16 region holding `capacity` token slots for every KV head of a layer:
// K of head 0..n_kv-1, then V of head 0..n_kv-1, each in the f16 codec's page
// layout (of the layer's K or V head dim) with page_tokens = capacity. Used
// for sinks, the residual ring and the chunk's own recent tokens.
struct F16Area {
  uint8_t* data = nullptr;
  int capacity = 0;         // slots (multiple of 16)
  size_t k_head_bytes = 0;  // bytes of one head's K region
  size_t v_head_bytes = 0;  // bytes of one head's V region
  int n_kv = 0;

  size_t total_bytes() const { return (k_head_bytes + v_head_bytes) * size_t(n_kv); }
  uint8_t* k(int h) const { return data + size_t(h) * k_head_bytes; }
  uint8_t* v(int h) const { return data + size_t(n_kv) * k_head_bytes + size_t(h) * v_head_bytes; }
};

struct LayerKv {
  KvLayerShape geom;  // this layer's heads and head dims (KvShape::layer)
  // The rotation of K (and of V when their head dims agree; else V's own,
  // from the same seed).
  std::shared_ptr<const Rotation> rotation, v_rotation;
  std::unique_ptr<Codec> k_codec, v_codec;    // codecs of the pages
  std::unique_ptr<Codec> f16_k, f16_v;        // layout of the F16Areas' K and V
  size_t k_head_bytes = 0, v_head_bytes = 0;  // one head's K (V) part of a page
  size_t page_bytes = 0;                      // whole page: n_kv x (K + V)
  // Page table. Page index i (counting evicted ones) holds positions
  // [S + i*P, S + (i+1)*P); pages.front() is index first_page.
  std::deque<uint8_t*> pages;
  // With selection (KvConfig::select > 0): the summaries of pages[i]
  // (page_summary.h), n_kv heads of summary_head_bytes each; empty otherwise.
  // Owned by this sequence (a fork copies them; they are small).
  SummaryStore summaries;
  size_t summary_head = 0;  // bytes of one head's summary (0 = no summaries)
  // Float min/max of the decoded keys of the page last written, per head
  // (n_kv x head_dim each), covering its slots [0, open_filled[h]) of page
  // index open_page[h] (-1: none): a decode step adds its one key instead of
  // decoding the page again. Reset by truncate, clear and load.
  std::vector<float> open_lo, open_hi;
  std::vector<int64_t> open_page;
  std::vector<int> open_filled;
  // With selection: the pages the last attention of this layer read, oldest
  // first (what the read-ahead fetches before its next one).
  std::vector<uint8_t*> last_read;
  int64_t first_page = 0;
  int64_t encoded = 0;  // positions [S, S + encoded) have been encoded into pages
                        // (>= max(0, n_tokens - S - R); more after truncate())
  F16Area sinks;        // positions [0, S)
  F16Area ring;         // residual: position j >= S lives in slot (j - S) % capacity
  // A layer left open by attend(..., more_readers) keeps its chunk's f16
  // tokens here for its later readers (the shared chunk area is another
  // layer's by then); held.data is null otherwise.
  F16Area held;
  ScratchBuffer held_buffer;

  uint8_t* page_k(uint8_t* page, int h) const { return page + size_t(h) * k_head_bytes; }
  uint8_t* page_v(uint8_t* page, int h, int n_kv) const {
    return page + size_t(n_kv) * k_head_bytes + size_t(h) * v_head_bytes;
  }
  const uint8_t* summary(size_t i, int h) const { return summaries.head(i, h); }
  // Recomputes head h's summary of pages[i] from its first `filled` slots.
  void summarize(size_t i, int h, int page_tokens, int filled);
  // Head h's summary of pages[i] (page index `index`) after slots [from, to)
  // were encoded; `track` (the chunk's last page) keeps and extends the open
  // float state, which only one task per head may do.
  void summarize_written(size_t i, int64_t index, int h, int page_tokens, int from, int to,
                         bool track);
  // Recomputes every head's summary of pages[i], whose first `filled` slots hold tokens.
  void summarize_page(size_t i, int n_kv, int page_tokens, int filled);
};

struct KvCache::Impl {
  KvShape shape;
  KvConfig config;
  int S = 0, R = 0, W = 0, P = 64;  // sinks, residual, window, page tokens
  std::shared_ptr<PagePool> pool;   // shared with every sequence made from it
  std::vector<LayerKv> layers;
  RecurrentStates states;  // shape.recurrent
  // Earlier states (KvCache::snapshot), oldest first, each at its position.
  struct Snapshot {
    int64_t position = 0;
    std::unique_ptr<RecurrentStates> states;
  };
  std::vector<Snapshot> snapshots;
  uint64_t snapshot_bytes() const;  // what the snapshots hold apart from `states`
  int64_t n_tokens = 0;

  // The chunk in flight (begin_chunk .. end_chunk).
  bool in_chunk = false;
  int chunk_n = 0;
  // S + encoded when the chunk began: the residual ring holds [ring_lo, n_tokens).
  // max(S, n_tokens - R) except after truncate(), when the ring may hold fewer.
  int64_t ring_lo = 0;
  std::vector<uint8_t> layer_state;  // 0 = untouched, 1 = written, 2 = attended
  // The chunk's tokens in f16 (scratch), slot = j - n_tokens, in the layout
  // of the layer written last (write() lays it out; that layer's attend()
  // and commit_recent() read it). chunk_buffer holds the widest layer's.
  F16Area chunk;
  ScratchBuffer chunk_buffer;
  // The chunk's f16 tokens as layer L's attention reads them.
  const F16Area& chunk_of(const LayerKv& L) const { return L.held.data ? L.held : chunk; }

  // Attention scratch of the attend() overload without one (the caller's
  // scratch is the caller's to account).
  AttentionScratch own_scratch;
  uint64_t peak_scratch = 0;

  bool private_pool = false;  // made by the constructor without a pool

  // Page selection counters (KvStats::select_page_reads, ...).
  int64_t select_page_reads = 0, select_dense_page_reads = 0;
  uint64_t page_bytes_read = 0;  // KvStats::page_bytes_read

  explicit Impl(std::shared_ptr<PagePool> p) : pool(std::move(p)) {}
  // Returns every page and f16 area to the pool (also when construction
  // failed half-way).
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  uint64_t scratch_bytes() const;
  void note_scratch() {
    const uint64_t now = scratch_bytes();
    if (now > peak_scratch) peak_scratch = now;
  }
  // After layer `layer`'s attention: the chunk's newest tokens become its
  // residual ring, and the layer is done for this chunk.
  void commit_recent(int layer);
  // First position a query at `pos` may see outside the sinks (window policy).
  int64_t window_lo(int64_t pos) const { return W > 0 ? pos - W + 1 : 0; }
  // A layer with the model's window that keeps only that window
  // (KvConfig::swa_window_only).
  bool keeps_window_only(const LayerKv& L) const {
    return config.swa_window_only && L.geom.window > 0;
  }
  // Whether `L` drops pages its queries can no longer see: under the window
  // policy, or keeping only its own window.
  bool evicts(const LayerKv& L) const { return W > 0 || keeps_window_only(L); }
  // The first position a query at `pos` sees in L's pages (0 = all).
  int64_t kept_from(const LayerKv& L, int64_t pos) const {
    const int64_t lo = window_lo(pos);
    return keeps_window_only(L) ? std::max(lo, pos - L.geom.window + 1) : lo;
  }
};

// The attention driver (attention.cc).
// sinks: the layer's learned sink logits per query head, or nullptr;
// softcap: 0, or the scores' soft-cap (AttendOptions).
void attend_layer(KvCache::Impl& c, int layer, const float* q, float* out, ThreadPool& pool,
                  AttentionScratch& scratch, const float* sinks, float softcap);
// With the pool's disk tier and read-ahead: asks the pool to read back the
// pages `layer`'s next attention is likely to read first (a dense layer's
// pages oldest first; a selecting layer's last selection), as many as half
// of what may be pinned at once, while the model computes what comes before.
void read_ahead_layer(const KvCache::Impl& c, int layer);

}  // namespace tkv::kv
