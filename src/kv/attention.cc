// The fused attention driver: causal attention of a chunk's queries over
// everything the store holds for one layer, read straight from the packed
// pages through the codecs' score()/accumulate() kernels.
//
// Work is cut into tasks (KV head) x (query tile) x (split of the key range).
// Each task runs an online softmax over its key tiles and leaves a partial
// (running max m, normalizer l, value accumulators); a second pass merges
// the splits with a log-sum-exp and applies the inverse rotation once per
// head. Scratch is O(query tile x key tile + rows x head_dim) per thread plus
// O(tasks x rows x head_dim) of partials: independent of the context length.
//
// Disk tier (PagePool with a spill directory): the pages the tasks read are
// pinned in RAM, read back from disk where they must be, before the tasks
// run. When they do not all fit in the budget at once (dense attention over
// a long context), the pages are cut into rounds, oldest first, each pinned
// in turn; a task keeps its online-softmax state in its partial between
// rounds and walks its tiles in the same order, so the result is
// bit-identical to one pass. With the pool's read-ahead a round is half of
// what may be pinned at once, and the next round's pages are handed to the
// pool's I/O thread before this one's tasks run, so reading and computing
// overlap; after the layer, the next layer's first pages are handed over
// the same way (read_ahead_layer), to be read while the model computes.
//
// Per-query policy semantics: a query at position p sees
//   sinks   [0, min(S, p+1))                             f16
//   pages   [max(S, wlo(p)), max(p - R + 1, rlo))        codec
//   recent  [max(S, wlo(p), p - R + 1, rlo), p + 1)      f16 (residual ring + this chunk)
// where wlo(p) = p - W + 1 under a window policy, else 0, and rlo is where
// the residual ring began when the chunk started (S + encoded): at most
// p - R + 1, so it changes nothing, except after truncate(), when positions
// below it that a fresh sequence would hold in f16 exist only in pages. Tokens of the
// chunk that leave the residual window during the chunk exist in both forms
// while it runs, so every query sees exactly what it would have seen had the
// chunk been decoded token by token.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "common/error.h"
#include "common/vec_math.h"
#include "kv/kv_cache_impl.h"
#include "kv/page_summary.h"
#include "kv/softmax_kernels.h"

namespace tkv::kv {

namespace {

enum class Kind { Sink, Page, Recent };

// Key tiles are at most this many tokens: one score row fits in L1 and a
// page (64 tokens) is one tile.
constexpr int kKeyTile = 64;
// Target rows (query tokens x GQA heads) per task.
constexpr int kRowsPerTask = 64;
// A split of the key range below this many tokens costs more (a task, a
// partial, a merge) than it saves: a short context is not split.
constexpr int64_t kMinSplitTokens = 256;

// A run of consecutive positions stored in consecutive slots of one page or area.
struct Source {
  Kind kind;
  const Codec* kc;
  const Codec* vc;
  const uint8_t* k0;  // head h: k0 + h * k_stride
  const uint8_t* v0;
  size_t k_stride, v_stride;
  int page_tokens;
  int64_t pos_lo, pos_hi;
  int slot_lo;              // slot holding pos_lo
  uint8_t* page = nullptr;  // Kind::Page: the pool allocation (pinned while read)
};

struct KeyTile {
  int source;
  int64_t lo, hi;  // positions
};

struct Visibility {
  int64_t S, R;
  const KvCache::Impl* c;
  int64_t model_window;  // the layer's own window (KvLayerShape::window), 0 = none
  // [lo, hi) of positions of `kind` visible to a query at p. The cache's
  // window policy spares the sinks; the model's window does not.
  std::pair<int64_t, int64_t> of(Kind kind, int64_t p) const {
    const int64_t ml = model_window > 0 ? p - model_window + 1 : 0;
    const int64_t wl = std::max(c->window_lo(p), ml);
    switch (kind) {
      case Kind::Sink:
        return {std::max<int64_t>(0, ml), std::min(S, p + 1)};
      case Kind::Page:
        return {std::max(S, wl), std::max(p - R + 1, c->ring_lo)};
      case Kind::Recent:
        return {std::max({S, wl, p - R + 1, c->ring_lo}), p + 1};
    }
    return {0, 0};
  }
};

// 1 / the softmax denominator of a row whose scores have maximum m and
// sum exp(s - m) = l, with one more term exp(sink) (a learned sink logit),
// as a factor on exp(s - m)-weighted sums: exp(m - M) / (l exp(m - M) +
// exp(sink - M)), M = max(m, sink), so that neither exponent overflows.
float sink_normalizer(float m, float l, float sink) {
  const float M = std::max(m, sink);
  const float a = std::exp(m - M);
  return a / (l * a + std::exp(sink - M));
}

void add_f16_area(std::vector<Source>& out, Kind kind, const LayerKv& L, const F16Area& a,
                  int64_t pos_lo, int64_t pos_hi, int slot_lo) {
  if (pos_hi <= pos_lo) return;
  out.push_back({kind, L.f16_k.get(), L.f16_v.get(), a.k(0), a.v(0), a.k_head_bytes, a.v_head_bytes,
                 a.capacity, pos_lo, pos_hi, slot_lo});
}

// Everything layer `layer` holds, as runs of positions, oldest first.
std::vector<Source> collect_sources(const KvCache::Impl& c, const LayerKv& L) {
  std::vector<Source> src;
  const int64_t S = c.S, R = c.R, n0 = c.n_tokens, n1 = c.n_tokens + c.chunk_n;
  const int n_kv = L.geom.n_kv_heads;
  if (S > 0) add_f16_area(src, Kind::Sink, L, L.sinks, 0, std::min(S, n1), 0);
  for (size_t i = 0; i < L.pages.size(); ++i) {
    const int64_t index = L.first_page + int64_t(i);
    const int64_t lo = S + index * c.P;
    const int64_t hi = std::min(lo + c.P, S + L.encoded);
    if (hi <= lo) continue;
    uint8_t* page = L.pages[i];
    src.push_back({Kind::Page, L.k_codec.get(), L.v_codec.get(), L.page_k(page, 0),
                   L.page_v(page, 0, n_kv), L.k_head_bytes, L.v_head_bytes, c.P, lo, hi, 0, page});
  }
  if (R > 0) {
    // Residual ring: positions [ring_lo, n0), slot (j - S) % capacity; may wrap.
    const int64_t lo = c.ring_lo;
    const int cap = L.ring.capacity;
    int64_t j = lo;
    while (j < n0) {
      const int slot = int((j - S) % cap);
      const int64_t run = std::min<int64_t>(n0 - j, cap - slot);
      add_f16_area(src, Kind::Recent, L, L.ring, j, j + run, slot);
      j += run;
    }
    // This chunk's own tokens (f16 scratch), slot = j - n0.
    const int64_t clo = std::max(S, n0);
    add_f16_area(src, Kind::Recent, L, c.chunk_of(L), clo, n1, int(clo - n0));
  }
  return src;
}

// Query-aware page selection (KvConfig::select): the key tiles each (KV
// head, query tile) task reads, [h * n_qt + qt]. Every tile of the dense
// list that is not a page's (sinks, residual, the chunk's own tokens) is
// kept; of the pages, each query of the tile keeps its newest visible page
// and its best select / P others by the summaries' bound on q.k (the max
// over the GQA group's heads; ties to the older page), and the tile reads
// the union. When a query sees no more pages than that, it keeps them all,
// so a budget covering every page gives the dense lists exactly.
//
// What does not depend on the head (each query tile's pages, oldest first,
// and their summaries) is found once per layer; a task then bounds the
// pages its query sees in one call and keeps the best by a threshold on
// the bounds (the keep_best-th largest, then the ties oldest first), which
// picks the same pages as sorting (-bound, page) would.
std::vector<std::vector<KeyTile>> select_tiles(const KvCache::Impl& c, const LayerKv& L,
                                               const float* q, const std::vector<Source>& sources,
                                               const std::vector<std::vector<KeyTile>>& tiles,
                                               int q_tile, const Visibility& vis,
                                               ThreadPool& pool) {
  const int n = c.chunk_n, n_kv = L.geom.n_kv_heads, n_heads = L.geom.n_heads;
  const int hd = L.geom.k_dim, G = n_heads / n_kv;
  const int n_qt = int(tiles.size());
  const size_t keep_best = size_t(c.config.select / c.P);
  // Page sources each query tile may read, oldest first.
  std::vector<std::vector<int>> tile_pages(static_cast<size_t>(n_qt));
  for (int qt = 0; qt < n_qt; ++qt) {
    std::vector<int>& pages = tile_pages[size_t(qt)];
    pages.reserve(tiles[size_t(qt)].size());
    for (const KeyTile& kt : tiles[size_t(qt)])
      if (sources[kt.source].kind == Kind::Page && (pages.empty() || pages.back() != kt.source))
        pages.push_back(kt.source);
  }
  // Each page source's place in the layer's summaries.
  std::vector<size_t> summary_of(sources.size(), 0);
  for (size_t s = 0; s < sources.size(); ++s)
    if (sources[s].kind == Kind::Page)
      summary_of[s] = size_t((sources[s].pos_lo - c.S) / c.P - L.first_page);

  std::vector<std::vector<KeyTile>> out(size_t(n_kv) * n_qt);
  pool.run(int64_t(n_kv) * n_qt, [&](int64_t task, int) {
    const int h = int(task / n_qt), qt = int(task % n_qt);
    const std::vector<KeyTile>& dense = tiles[size_t(qt)];
    const std::vector<int>& pages = tile_pages[size_t(qt)];
    std::vector<KeyTile>& mine = out[size_t(task)];
    if (pages.size() <= keep_best + 1) {
      mine = dense;
      return;
    }
    std::vector<char> chosen(sources.size(), 0);
    std::vector<const uint8_t*> summaries(pages.size());
    for (size_t i = 0; i < pages.size(); ++i)
      summaries[i] = L.summary(summary_of[size_t(pages[i])], h);
    std::vector<float> bounds(pages.size()), best(keep_best);
    const int t0 = qt * q_tile, t1 = std::min(n, t0 + q_tile);
    for (int t = t0; t < t1; ++t) {
      // The pages a query sees are a run of `pages` (positions increase along it).
      // (Plain variables: lambdas may not capture structured bindings before clang 16.)
      const auto visible = vis.of(Kind::Page, c.n_tokens + t);
      const auto vlo = visible.first, vhi = visible.second;
      const auto first = std::partition_point(
          pages.begin(), pages.end(), [&](int s) { return sources[size_t(s)].pos_hi <= vlo; });
      const auto last = std::partition_point(
          first, pages.end(), [&](int s) { return sources[size_t(s)].pos_lo < vhi; });
      if (first == last) continue;
      chosen[size_t(*(last - 1))] = 1;  // the newest
      const size_t a = size_t(first - pages.begin());
      const size_t m = size_t(last - first) - 1;  // the others, oldest first
      if (m <= keep_best) {
        for (size_t i = 0; i < m; ++i) chosen[size_t(pages[a + i])] = 1;
        continue;
      }
      if (keep_best == 0) continue;  // a budget under one page: the newest only
      const float* qh = q + (size_t(t) * n_heads + size_t(h) * G) * hd;
      summary_bounds_max(qh, G, summaries.data() + a, m, hd, bounds.data());
      // The keep_best-th largest bound (a min-heap of the best so far: most
      // pages fall below its top and cost one compare); every page above it
      // is kept, and of those equal to it the oldest, as many as there is
      // room for.
      std::copy(bounds.begin(), bounds.begin() + ptrdiff_t(keep_best), best.begin());
      std::make_heap(best.begin(), best.end(), std::greater<float>());
      for (size_t i = keep_best; i < m; ++i)
        if (bounds[i] > best.front()) {
          std::pop_heap(best.begin(), best.end(), std::greater<float>());
          best.back() = bounds[i];
          std::push_heap(best.begin(), best.end(), std::greater<float>());
        }
      const float threshold = best.front();
      size_t above = 0;
      for (size_t i = 0; i < m; ++i) above += bounds[i] > threshold;
      size_t ties = keep_best - above;
      for (size_t i = 0; i < m; ++i) {
        const bool tie = bounds[i] == threshold && ties > 0;
        if (bounds[i] > threshold || tie) chosen[size_t(pages[a + i])] = 1;
        ties -= tie;
      }
    }
    mine.reserve(dense.size() - pages.size() +
                 std::min(pages.size(), (keep_best + 1) * size_t(t1 - t0)));
    for (const KeyTile& kt : dense)
      if (sources[kt.source].kind != Kind::Page || chosen[size_t(kt.source)]) mine.push_back(kt);
  });
  return out;
}

struct Plan {
  int G, kd, vd, n_kv;
  int q_tile;   // query tokens per task
  int n_qt;     // query tiles
  int n_split;  // key-range splits per (head, query tile)
  int rows_max;
  size_t partial_floats;  // per task: m, l, accP, accR (vd each) for rows_max rows
};

// Per-thread working memory of one task, carved from the thread's buffer.
struct TaskScratch {
  float* q;              // rows x kd (scaled queries)
  float* prep_page;      // rows x page codec prepared floats
  float* prep_f16;       // rows x f16 prepared floats
  float* scores;         // rows x kKeyTile
  float *m, *l, *corr;   // rows
  float *acc_p, *acc_r;  // rows x vd: plain and rotated value domains
  static size_t floats(int rows, int kd, int vd, size_t pq_page, size_t pq_f16) {
    return size_t(rows) * (kd + pq_page + pq_f16 + kKeyTile + 3 + 2 * size_t(vd)) + 128;
  }
  void carve(float* base, int rows, int kd, int vd, size_t pq_page, size_t pq_f16) {
    float* p = base;
    auto take = [&](size_t n) {
      float* r = p;
      p += (n + 15) & ~size_t(15);
      return r;
    };
    q = take(size_t(rows) * kd);
    prep_page = take(size_t(rows) * pq_page);
    prep_f16 = take(size_t(rows) * pq_f16);
    scores = take(size_t(rows) * kKeyTile);
    m = take(rows);
    l = take(rows);
    corr = take(rows);
    acc_p = take(size_t(rows) * vd);
    acc_r = take(size_t(rows) * vd);
  }
};

}  // namespace

uint64_t KvCache::Impl::scratch_bytes() const {
  uint64_t held = 0;
  for (const LayerKv& L : layers) held += L.held_buffer.capacity();
  return chunk_buffer.capacity() + held + own_scratch.bytes();
}

uint64_t AttentionScratch::bytes() const {
  uint64_t total = partials_.capacity();
  for (const auto& s : thread_) total += s.capacity();
  return total;
}

void AttentionScratch::release() {
  thread_.clear();
  partials_.release();
}

void AttentionScratch::prepare(int threads, size_t thread_bytes, size_t partial_bytes) {
  if (thread_.size() < size_t(threads)) thread_.resize(size_t(threads));
  for (int t = 0; t < threads; ++t) thread_[size_t(t)].reserve(thread_bytes);
  partials_.reserve(partial_bytes);
  peak_ = std::max(peak_, bytes());
}

void attend_layer(KvCache::Impl& c, int layer, const float* q, float* out, ThreadPool& pool,
                  AttentionScratch& scratch, const float* sinks, float softcap) {
  const LayerKv& L = c.layers[layer];
  const int n = c.chunk_n, n_kv = L.geom.n_kv_heads, n_heads = L.geom.n_heads;
  const int kd = L.geom.k_dim, vd = L.geom.v_dim, G = n_heads / n_kv;
  const int64_t n0 = c.n_tokens;
  const float q_scale = 1.0f / std::sqrt(float(kd));
  const std::vector<Source> sources = collect_sources(c, L);
  const Visibility vis{c.S, c.R, &c, L.geom.window};

  Plan plan{};
  plan.G = G;
  plan.kd = kd;
  plan.vd = vd;
  plan.n_kv = n_kv;
  plan.q_tile = std::max(1, std::min(n, kRowsPerTask / G));
  plan.n_qt = (n + plan.q_tile - 1) / plan.q_tile;
  plan.rows_max = plan.q_tile * G;

  // Key tiles visible to at least one query of each query tile.
  std::vector<std::vector<KeyTile>> tiles(plan.n_qt);
  size_t max_tiles = 0;
  int64_t max_keys = 0;  // most key positions any query tile walks
  for (int qt = 0; qt < plan.n_qt; ++qt) {
    const int64_t p_first = n0 + int64_t(qt) * plan.q_tile;
    const int64_t p_last = std::min<int64_t>(n0 + n, p_first + plan.q_tile) - 1;
    for (int s = 0; s < int(sources.size()); ++s) {
      const Source& src = sources[s];
      // Visible intervals move right monotonically with p: their union over
      // the tile is within [lo(p_first), hi(p_last)).
      const int64_t lo = std::max(src.pos_lo, vis.of(src.kind, p_first).first);
      const int64_t hi = std::min(src.pos_hi, vis.of(src.kind, p_last).second);
      for (int64_t t = lo; t < hi;) {
        // Align tile ends to slot multiples of kKeyTile so pages stay whole.
        const int64_t slot = src.slot_lo + (t - src.pos_lo);
        const int64_t end = std::min(hi, t + (kKeyTile - slot % kKeyTile));
        tiles[qt].push_back({s, t, end});
        t = end;
      }
    }
  }
  // With page selection each KV head's tasks walk their own lists.
  const bool selecting = L.summary_head > 0 && (n == 1 || c.config.select_prefill) &&
                         layer >= c.config.select_dense_layers;
  std::vector<std::vector<KeyTile>> head_tiles;
  if (selecting) head_tiles = select_tiles(c, L, q, sources, tiles, plan.q_tile, vis, pool);
  const auto tiles_of = [&](int h, int qt) -> const std::vector<KeyTile>& {
    return selecting ? head_tiles[size_t(h) * plan.n_qt + qt] : tiles[size_t(qt)];
  };
  if (selecting) {
    auto page_tiles = [&](const std::vector<KeyTile>& list) {
      int64_t k = 0;
      for (const KeyTile& kt : list) k += sources[size_t(kt.source)].kind == Kind::Page;
      return k;
    };
    for (const auto& list : tiles) c.select_dense_page_reads += n_kv * page_tiles(list);
    for (const auto& list : head_tiles) c.select_page_reads += page_tiles(list);
  }
  for (const auto& list : selecting ? head_tiles : tiles) {
    max_tiles = std::max(max_tiles, list.size());
    int64_t keys = 0;
    for (const KeyTile& kt : list) keys += kt.hi - kt.lo;
    max_keys = std::max(max_keys, keys);
  }

  // Split the key range when there are too few (head, query tile) tasks to
  // keep every thread busy -- decode with few KV heads at long context.
  const int base_tasks = n_kv * plan.n_qt;
  const int want_tasks = 4 * pool.size();
  plan.n_split = 1;
  if (base_tasks < want_tasks && max_tiles > 1)
    plan.n_split = int(std::min<size_t>(max_tiles, (want_tasks + base_tasks - 1) / base_tasks));
  plan.n_split =
      int(std::max<int64_t>(1, std::min<int64_t>(plan.n_split, max_keys / kMinSplitTokens)));
  // Per task: m, l, accP, accR for rows_max rows, and whether accR holds
  // anything (rotated-domain values were accumulated).
  plan.partial_floats = size_t(plan.rows_max) * (2 + 2 * size_t(vd)) + 1;

  const size_t pq_page = L.k_codec->prepared_query_floats();
  const size_t pq_f16 = L.f16_k->prepared_query_floats();
  const size_t task_floats = TaskScratch::floats(plan.rows_max, kd, vd, pq_page, pq_f16);
  const int n_tasks = base_tasks * plan.n_split;
  scratch.prepare(pool.size(), task_floats * sizeof(float),
                  size_t(n_tasks) * plan.partial_floats * sizeof(float));
  float* partials = scratch.partial_floats();
  c.note_scratch();

  const bool v_rotated = L.v_codec->values_rotated();

  // Rounds of pages (disk tier). rank[source]: a page's place among the
  // pages some task reads, oldest first; sinks rank -1 and the residual and
  // the chunk's tokens n_pages, so that a round [lo, hi) of ranks (the first
  // from -1, the last to n_pages + 1) is a contiguous part of every list.
  std::vector<int64_t> rank(sources.size(), -1);
  std::vector<uint8_t*> read_pages;  // oldest first
  {
    std::vector<char> read(sources.size(), 0);
    for (const auto& list : selecting ? head_tiles : tiles)
      for (const KeyTile& kt : list) read[size_t(kt.source)] = 1;
    for (size_t s = 0; s < sources.size(); ++s)
      if (read[s] && sources[s].kind == Kind::Page) {
        rank[s] = int64_t(read_pages.size());
        read_pages.push_back(sources[s].page);
      }
    for (size_t s = 0; s < sources.size(); ++s)
      if (sources[s].kind == Kind::Recent) rank[s] = int64_t(read_pages.size());
  }
  const int64_t n_read = int64_t(read_pages.size());
  c.page_bytes_read += uint64_t(n_read) * L.page_bytes;
  if (selecting) c.layers[size_t(layer)].last_read = read_pages;

  // Runs the tasks over the tiles of ranks [lo, hi); the first round
  // (lo == -1) starts each task's softmax state, later ones continue it.
  auto run_round = [&](int64_t lo, int64_t hi) {
    pool.run(n_tasks, [&](int64_t task, int thread) {
      const int split = int(task % plan.n_split);
      const int qt = int((task / plan.n_split) % plan.n_qt);
      const int h = int(task / (int64_t(plan.n_split) * plan.n_qt));
      const int t0 = qt * plan.q_tile, t1 = std::min(n, t0 + plan.q_tile);
      const int rows = (t1 - t0) * G;

      TaskScratch ts;
      ts.carve(scratch.thread_floats(thread), rows, kd, vd, pq_page, pq_f16);
      for (int t = t0; t < t1; ++t)
        for (int g = 0; g < G; ++g) {
          const float* src = q + (size_t(t) * n_heads + size_t(h) * G + g) * kd;
          float* dst = ts.q + (size_t(t - t0) * G + g) * kd;
          for (int i = 0; i < kd; ++i) dst[i] = src[i] * q_scale;
        }
      bool rotated_values = false;
      const auto& my_tiles = tiles_of(h, qt);
      size_t tb = my_tiles.size() * split / plan.n_split;
      size_t te = my_tiles.size() * (split + 1) / plan.n_split;
      // This round's part of the split (ranks do not decrease along a list).
      const bool first_round = lo < 0;
      while (tb < te && rank[size_t(my_tiles[tb].source)] < lo) ++tb;
      size_t round_end = tb;
      while (round_end < te && rank[size_t(my_tiles[round_end].source)] < hi) ++round_end;
      te = round_end;
      float* part = partials + size_t(task) * plan.partial_floats;
      if (!first_round && tb == te) return;  // nothing of this task in this round
      bool need_page = false, need_f16 = false;
      for (size_t i = tb; i < te; ++i)
        (sources[my_tiles[i].source].kind == Kind::Page ? need_page : need_f16) = true;
      if (need_page) L.k_codec->prepare_queries(ts.q, rows, ts.prep_page);
      if (need_f16) L.f16_k->prepare_queries(ts.q, rows, ts.prep_f16);
      if (first_round) {
        std::fill(ts.m, ts.m + rows, kMaskedScore);
        std::fill(ts.l, ts.l + rows, 0.0f);
        std::fill(ts.acc_p, ts.acc_p + size_t(rows) * vd, 0.0f);
        std::fill(ts.acc_r, ts.acc_r + size_t(rows) * vd, 0.0f);
      } else {  // the state the previous rounds left
        std::memcpy(ts.m, part, sizeof(float) * rows);
        std::memcpy(ts.l, part + plan.rows_max, sizeof(float) * rows);
        std::memcpy(ts.acc_p, part + 2 * plan.rows_max, sizeof(float) * rows * vd);
        std::memcpy(ts.acc_r, part + 2 * plan.rows_max + size_t(plan.rows_max) * vd,
                    sizeof(float) * rows * vd);
        rotated_values = part[plan.partial_floats - 1] != 0.0f;
      }

      // [lo, hi) visible to *every* row of this task, per kind: tiles inside it
      // need no masking.
      const int64_t p_first = n0 + t0, p_last = n0 + t1 - 1;
      auto tile_vis_lo = [&](Kind kind, const KeyTile&) { return vis.of(kind, p_last).first; };
      auto tile_vis_hi = [&](Kind kind, const KeyTile&) { return vis.of(kind, p_first).second; };
      for (size_t i = tb; i < te; ++i) {
        const KeyTile& kt = my_tiles[i];
        const Source& src = sources[kt.source];
        const int b = int(src.slot_lo + (kt.lo - src.pos_lo));
        const int e = int(b + (kt.hi - kt.lo));
        const int len = e - b;
        const uint8_t* kp = src.k0 + size_t(h) * src.k_stride;
        const uint8_t* vp = src.v0 + size_t(h) * src.v_stride;
        const float* prep = src.kind == Kind::Page ? ts.prep_page : ts.prep_f16;
        if (i + 1 < te) {  // start loading the next tile while this one computes
          const Source& nx = sources[my_tiles[i + 1].source];
          if (nx.kind == Kind::Page && nx.k0 != src.k0) {
            nx.kc->prefetch(nx.k0 + size_t(h) * nx.k_stride, nx.page_tokens);
            nx.vc->prefetch(nx.v0 + size_t(h) * nx.v_stride, nx.page_tokens);
          }
        }
        src.kc->score(prep, rows, kp, src.page_tokens, b, e, ts.scores, kKeyTile);
        if (softcap > 0.0f)  // before the mask, which it would undo
          for (int r = 0; r < rows; ++r)
            soft_cap(ts.scores + size_t(r) * kKeyTile, size_t(len), softcap);

        // Mask what each query may not see (only near the diagonal and the
        // policy boundaries; most tiles are fully visible to every row).
        const bool partial = kt.lo < tile_vis_lo(src.kind, kt) || kt.hi > tile_vis_hi(src.kind, kt);
        if (partial) {
          for (int r = 0; r < rows; ++r) {
            float* s = ts.scores + size_t(r) * kKeyTile;
            auto [vlo, vhi] = vis.of(src.kind, n0 + t0 + r / G);
            vlo = std::clamp(vlo, kt.lo, kt.hi);
            vhi = std::clamp(vhi, vlo, kt.hi);
            for (int64_t j = kt.lo; j < vlo; ++j) s[j - kt.lo] = kMaskedScore;
            for (int64_t j = vhi; j < kt.hi; ++j) s[j - kt.lo] = kMaskedScore;
          }
        }
        online_softmax_tile(ts.scores, kKeyTile, rows, len, ts.m, ts.l, ts.corr);
        for (int r = 0; r < rows; ++r) {
          if (ts.corr[r] == 1.0f) continue;
          scale_in_place(ts.acc_p + size_t(r) * vd, vd, ts.corr[r]);
          scale_in_place(ts.acc_r + size_t(r) * vd, vd, ts.corr[r]);
        }
        rotated_values |= src.vc->values_rotated();
        float* acc = src.vc->values_rotated() ? ts.acc_r : ts.acc_p;
        src.vc->accumulate(ts.scores, rows, kKeyTile, vp, src.page_tokens, b, e, acc);
      }

      std::memcpy(part, ts.m, sizeof(float) * rows);
      std::memcpy(part + plan.rows_max, ts.l, sizeof(float) * rows);
      std::memcpy(part + 2 * plan.rows_max, ts.acc_p, sizeof(float) * rows * vd);
      std::memcpy(part + 2 * plan.rows_max + size_t(plan.rows_max) * vd, ts.acc_r,
                  sizeof(float) * rows * vd);
      part[plan.partial_floats - 1] = rotated_values ? 1.0f : 0.0f;
    });
  };
  if (!c.pool->spilling() || n_read == 0) {
    run_round(-1, n_read + 1);
  } else {
    // As many pages per round as the pool can pin (half with read-ahead,
    // the other half being read meanwhile): halved (for this round and the
    // next) until a pin succeeds.
    const bool ahead = c.pool->read_ahead_on();
    int64_t per_round = n_read;
    if (ahead) {
      const int64_t room = c.pool->pinnable(L.page_bytes);
      if (n_read > room) per_round = std::max<int64_t>(1, room / 2);
    }
    for (int64_t b = 0; b < n_read;) {
      const int64_t e = std::min(n_read, b + per_round);
      const std::vector<uint8_t*> round(read_pages.begin() + b, read_pages.begin() + e);
      try {
        c.pool->pin(round, &pool);
      } catch (const KvBudgetExceeded&) {
        if (e - b == 1) throw;
        per_round = (e - b + 1) / 2;
        continue;
      }
      if (ahead && e < n_read)
        c.pool->read_ahead(
            {read_pages.begin() + e, read_pages.begin() + std::min(n_read, e + per_round)});
      try {
        run_round(b == 0 ? -1 : b, e == n_read ? n_read + 1 : e);
      } catch (...) {
        c.pool->unpin(round);
        throw;
      }
      c.pool->unpin(round);
      b = e;
    }
  }

  // Merge the splits (log-sum-exp), undo the rotation, normalize.
  pool.run(base_tasks, [&](int64_t task, int thread) {
    const int qt = int(task % plan.n_qt);
    const int h = int(task / plan.n_qt);
    const int t0 = qt * plan.q_tile, t1 = std::min(n, t0 + plan.q_tile);
    const int rows = (t1 - t0) * G;
    TaskScratch ts;
    ts.carve(scratch.thread_floats(thread), rows, kd, vd, pq_page, pq_f16);
    const float* first = partials + size_t(task) * plan.n_split * plan.partial_floats;
    bool rotated_values = false;
    for (int s = 0; s < plan.n_split; ++s)
      rotated_values |= first[s * plan.partial_floats + plan.partial_floats - 1] != 0.0f;
    for (int r = 0; r < rows; ++r) {
      float M = kMaskedScore;
      for (int s = 0; s < plan.n_split; ++s) M = std::max(M, first[s * plan.partial_floats + r]);
      float l = 0;
      float* ap = ts.acc_p + size_t(r) * vd;
      float* ar = ts.acc_r + size_t(r) * vd;
      std::fill(ap, ap + vd, 0.0f);
      std::fill(ar, ar + vd, 0.0f);
      for (int s = 0; s < plan.n_split; ++s) {
        const float* part = first + s * plan.partial_floats;
        const float ls = part[plan.rows_max + r];
        if (ls == 0.0f) continue;
        const float w = std::exp(part[r] - M);
        l += ls * w;
        add_scaled(part + 2 * plan.rows_max + size_t(r) * vd, vd, w, ap);
        add_scaled(part + 2 * plan.rows_max + size_t(plan.rows_max) * vd + size_t(r) * vd, vd, w,
                   ar);
      }
      ts.l[r] = l;
      ts.m[r] = M;
    }
    // Nothing accumulated in the rotated domain (e.g. every visible token is
    // still in f16): acc_r is zero and R^T of it is too.
    if (v_rotated && rotated_values) {
      L.v_codec->unrotate(ts.acc_r, rows);
      for (size_t i = 0; i < size_t(rows) * vd; ++i) ts.acc_p[i] += ts.acc_r[i];
    }
    for (int r = 0; r < rows; ++r) {
      const int t = t0 + r / G, g = r % G;
      float* dst = out + (size_t(t) * n_heads + size_t(h) * G + g) * vd;
      float inv = ts.l[r] > 0 ? 1.0f / ts.l[r] : 0.0f;
      if (sinks != nullptr && ts.l[r] > 0)
        inv = sink_normalizer(ts.m[r], ts.l[r], sinks[h * G + g]);
      const float* ap = ts.acc_p + size_t(r) * vd;
      for (int i = 0; i < vd; ++i) dst[i] = ap[i] * inv;
    }
  });
}

void read_ahead_layer(const KvCache::Impl& c, int layer) {
  if (!c.pool->read_ahead_on()) return;
  const LayerKv& L = c.layers[size_t(layer)];
  const size_t most = size_t(std::max<int64_t>(1, c.pool->pinnable(L.page_bytes) / 2));
  const bool selects = L.summary_head > 0 && !L.last_read.empty();
  std::vector<uint8_t*> pages;
  if (selects) {
    pages.assign(L.last_read.begin(), L.last_read.begin() + std::min(most, L.last_read.size()));
  } else if (L.geom.window > 0) {  // the newest pages: those the window reaches
    const size_t n = std::min({most, L.pages.size(), size_t(L.geom.window / c.P + 2)});
    pages.assign(L.pages.end() - ptrdiff_t(n), L.pages.end());
  } else {
    pages.assign(L.pages.begin(), L.pages.begin() + ptrdiff_t(std::min(most, L.pages.size())));
  }
  c.pool->read_ahead(pages);
}

}  // namespace tkv::kv
