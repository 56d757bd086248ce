// KvCache bookkeeping: construction and validation, the chunk protocol
// (write encodes, attend delegates to attention.cc, end_chunk commits and
// evicts), statistics. See kv_cache.h for the storage model.
#include <algorithm>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "common/f16.h"
#include "kv/kv_cache_impl.h"
#include "kv/page_summary.h"

namespace tkv::kv {

namespace {

int round_up_16(int n) {
  return (n + 15) / 16 * 16;
}

// Head vectors are staged on the stack while re-encoding; no model has more.
constexpr int kMaxHeadDim = 1024;

// The layout of an f16 area of `tokens` slots for layer L, over `data`.
F16Area area_layout(const LayerKv& L, int tokens, uint8_t* data = nullptr) {
  F16Area a;
  a.data = data;
  if (tokens <= 0) return a;
  a.capacity = round_up_16(tokens);
  a.k_head_bytes = L.f16_k->page_bytes(a.capacity);
  a.v_head_bytes = L.f16_v->page_bytes(a.capacity);
  a.n_kv = L.geom.n_kv_heads;
  return a;
}

F16Area make_area(PagePool& pool, const LayerKv& L, int tokens) {
  F16Area a = area_layout(L, tokens);
  if (a.capacity > 0) a.data = pool.allocate(a.total_bytes());
  return a;
}

// A per-layer shape: n_layers entries, each valid, the scalars the largest.
void validate_layers(const KvShape& s) {
  if (int(s.layers.size()) != s.n_layers)
    fail("KV cache: ", s.layers.size(), " layer shapes for ", s.n_layers, " layers");
  for (int l = 0; l < s.n_layers; ++l) {
    const KvLayerShape& g = s.layers[size_t(l)];
    if (g.n_heads <= 0 || g.n_kv_heads <= 0 || g.k_dim <= 0 || g.v_dim <= 0 || g.window < 0)
      fail("KV cache: invalid shape of layer ", l, " (heads ", g.n_heads, ", kv heads ",
           g.n_kv_heads, ", head dims ", g.k_dim, "/", g.v_dim, ", window ", g.window, ")");
    if (g.n_heads % g.n_kv_heads != 0)
      fail("KV cache: layer ", l, ": ", g.n_heads, " query heads is not a multiple of ",
           g.n_kv_heads, " KV heads");
  }
  const KvShape widest = KvShape::of_layers(s.layers, s.max_tokens);
  if (widest.n_heads != s.n_heads || widest.n_kv_heads != s.n_kv_heads ||
      widest.head_dim != s.head_dim)
    fail("KV cache: the shape's heads and head_dim are not the largest of its layers'");
}

void validate(const KvShape& s, const KvConfig& c) {
  if (s.n_layers <= 0 || s.n_heads <= 0 || s.n_kv_heads <= 0 || s.head_dim <= 0)
    fail("KV cache: invalid shape (layers ", s.n_layers, ", heads ", s.n_heads, ", kv heads ",
         s.n_kv_heads, ", head_dim ", s.head_dim, ")");
  if (s.layers.empty() && s.n_heads % s.n_kv_heads != 0)
    fail("KV cache: ", s.n_heads, " query heads is not a multiple of ", s.n_kv_heads, " KV heads");
  if (!s.layers.empty()) validate_layers(s);
  if (s.max_tokens <= 0) fail("KV cache: context length must be positive");
  for (int64_t n : s.recurrent)
    if (n <= 0 || n > (int64_t(1) << 32))
      fail("KV cache: a recurrent layer's state of ", n, " floats");
  if (s.head_dim > kMaxHeadDim) fail("KV cache: head_dim ", s.head_dim, " above ", kMaxHeadDim);
  if (c.page_tokens < 16 || c.page_tokens % 16 != 0 || c.page_tokens > 4096)
    fail("KV cache: page size ", c.page_tokens, ": must be a multiple of 16 in [16, 4096]");
  if (c.sinks < -1 || c.residual < -1 || c.window < 0)
    fail("KV cache: sinks, residual and window must not be negative");
  if (c.window > 0 && c.window <= c.effective_residual())
    fail("KV cache: window ", c.window, " must be larger than the residual window (",
         c.effective_residual(), " tokens)");
  if (c.effective_sinks() > 1024) fail("KV cache: ", c.sinks, " sinks: at most 1024");
  if (c.effective_residual() > 65536)
    fail("KV cache: residual window of ", c.residual, " tokens: at most 65536");
  if (c.select < 0) fail("KV cache: page selection of ", c.select, " tokens: must not be negative");
  if (c.select_dense_layers < 0)
    fail("KV cache: dense layers of page selection must not be negative");
  for (const auto& o : c.overrides) {
    const int l = o.layer < 0 ? s.n_layers + o.layer : o.layer;
    if (l < 0 || l >= s.n_layers)
      fail("KV cache: layer override for layer ", o.layer, ": the model has ", s.n_layers,
           " layers");
  }
}

// write(): the chunk's sinks into the sink area and (with a residual window)
// all its tokens into the chunk area, in f16. k, v: the chunk's rows.
void write_f16(KvCache::Impl& c, LayerKv& L, const float* k, const float* v) {
  const int n = c.chunk_n, n_kv = L.geom.n_kv_heads, kd = L.geom.k_dim, vd = L.geom.v_dim;
  const int64_t n0 = c.n_tokens, S = c.S, R = c.R;
  const size_t k_stride = size_t(n_kv) * kd, v_stride = size_t(n_kv) * vd;
  for (int t = 0; t < n; ++t) {
    const int64_t j = n0 + t;
    const float* kt = k + size_t(t) * k_stride;
    const float* vt = v + size_t(t) * v_stride;
    for (int h = 0; h < n_kv; ++h) {
      if (j < S) {
        L.f16_k->encode(kt + size_t(h) * kd, L.sinks.k(h), L.sinks.capacity, int(j));
        L.f16_v->encode(vt + size_t(h) * vd, L.sinks.v(h), L.sinks.capacity, int(j));
      } else if (R > 0) {
        L.f16_k->encode(kt + size_t(h) * kd, c.chunk.k(h), c.chunk.capacity, t);
        L.f16_v->encode(vt + size_t(h) * vd, c.chunk.v(h), c.chunk.capacity, t);
      }
    }
  }
}

// write(): encodes head h of positions [lo, hi) that fall in page index
// `index` into that page, and updates its summary (`last`: the chunk's last
// page). With a residual window the source is the token's f16 form (ring or
// chunk), so a page holds the same bytes however the sequence was chunked;
// without one it is the exact input.
void encode_page_head(const KvCache::Impl& c, LayerKv& L, const float* k, const float* v,
                      int64_t lo, int64_t hi, int64_t index, int h, bool last) {
  const int n_kv = L.geom.n_kv_heads, kd = L.geom.k_dim, vd = L.geom.v_dim;
  const int64_t n0 = c.n_tokens, S = c.S, R = c.R;
  const size_t k_stride = size_t(n_kv) * kd, v_stride = size_t(n_kv) * vd;
  const int64_t jb = std::max(lo, S + index * c.P), je = std::min(hi, S + (index + 1) * c.P);
  TKV_CHECK(index - L.first_page >= 0 && index - L.first_page < int64_t(L.pages.size()));
  uint8_t* page = L.pages[size_t(index - L.first_page)];
  float kbuf[kMaxHeadDim], vbuf[kMaxHeadDim];
  for (int64_t j = jb; j < je; ++j) {
    const float *ksrc, *vsrc;
    if (R == 0) {
      ksrc = k + size_t(j - n0) * k_stride + size_t(h) * kd;
      vsrc = v + size_t(j - n0) * v_stride + size_t(h) * vd;
    } else if (j < n0) {
      const int rs = int((j - S) % L.ring.capacity);
      L.f16_k->decode(L.ring.k(h), L.ring.capacity, rs, kbuf);
      L.f16_v->decode(L.ring.v(h), L.ring.capacity, rs, vbuf);
      ksrc = kbuf;
      vsrc = vbuf;
    } else {
      L.f16_k->decode(c.chunk.k(h), c.chunk.capacity, int(j - n0), kbuf);
      L.f16_v->decode(c.chunk.v(h), c.chunk.capacity, int(j - n0), vbuf);
      ksrc = kbuf;
      vsrc = vbuf;
    }
    const int slot = int((j - S) % c.P);
    L.k_codec->encode(ksrc, L.page_k(page, h), c.P, slot);
    L.v_codec->encode(vsrc, L.page_v(page, h, n_kv), c.P, slot);
  }
  if (L.summary_head > 0 && je > jb)
    L.summarize_written(size_t(index - L.first_page), index, h, c.P, int(jb - (S + index * c.P)),
                        int(je - (S + index * c.P)), last);
}

// "12, 40" (or "none"), for messages.
std::string snapshot_positions(const KvCache::Impl& c) {
  std::string out;
  for (const auto& snap : c.snapshots) out += str(out.empty() ? "" : ", ", snap.position);
  return out.empty() ? "none" : out;
}

}  // namespace

void LayerKv::summarize(size_t i, int h, int page_tokens, int filled) {
  float work[kMaxHeadDim];
  summarize_keys(*k_codec, page_k(pages[i], h), page_tokens, filled, summaries.head(i, h), work);
}

void LayerKv::summarize_written(size_t i, int64_t index, int h, int page_tokens, int from, int to,
                                bool track) {
  const int hd = k_codec->head_dim();
  float work[kMaxHeadDim], lo_local[kMaxHeadDim], hi_local[kMaxHeadDim];
  float* lo = track ? open_lo.data() + size_t(h) * hd : lo_local;
  float* hi = track ? open_hi.data() + size_t(h) * hd : hi_local;
  const uint8_t* kp = page_k(pages[i], h);
  if (track && open_page[size_t(h)] == index && open_filled[size_t(h)] == from) {
    summary_extend(*k_codec, kp, page_tokens, from, to, lo, hi, work);
  } else {
    summary_reset(lo, hi, hd);
    summary_extend(*k_codec, kp, page_tokens, 0, to, lo, hi, work);
  }
  summary_store(lo, hi, hd, summaries.head(i, h));
  if (track) {
    open_page[size_t(h)] = index;
    open_filled[size_t(h)] = to;
  }
}

void LayerKv::summarize_page(size_t i, int n_kv, int page_tokens, int filled) {
  for (int h = 0; h < n_kv; ++h) summarize(i, h, page_tokens, filled);
}

KvShape KvShape::of_layers(std::vector<KvLayerShape> layers, int max_tokens) {
  KvShape s;
  s.n_layers = int(layers.size());
  s.max_tokens = max_tokens;
  for (const KvLayerShape& g : layers) {
    s.n_heads = std::max(s.n_heads, g.n_heads);
    s.n_kv_heads = std::max(s.n_kv_heads, g.n_kv_heads);
    s.head_dim = std::max({s.head_dim, g.k_dim, g.v_dim});
  }
  s.layers = std::move(layers);
  return s;
}

bool KvShape::uniform() const {
  for (const KvLayerShape& g : layers)
    if (!(g == KvLayerShape{n_heads, n_kv_heads, head_dim, head_dim})) return false;
  return true;
}

bool KvShape::same_layers(const KvShape& o) const {
  if (n_layers != o.n_layers || recurrent != o.recurrent) return false;
  for (int l = 0; l < n_layers; ++l)
    if (!(layer(l) == o.layer(l))) return false;
  return true;
}

bool KvShape::operator==(const KvShape& o) const {
  return max_tokens == o.max_tokens && same_layers(o);
}

KvCache::KvCache(const KvShape& shape, const KvConfig& config)
    : KvCache(shape, config, std::make_shared<PagePool>(config.budget_bytes, config.spill_dir)) {
  impl_->private_pool = true;
  impl_->pool->set_read_ahead(config.read_ahead);
}

KvCache::KvCache(const KvShape& shape, const KvConfig& config, std::shared_ptr<PagePool> pool)
    : impl_(std::make_unique<Impl>(std::move(pool))) {
  TKV_CHECK(impl_->pool != nullptr);
  validate(shape, config);
  Impl& c = *impl_;
  c.shape = shape;
  c.config = config;
  c.S = config.effective_sinks();
  c.R = config.effective_residual();
  c.W = config.window;
  c.P = config.page_tokens;
  c.layers.resize(shape.n_layers);
  for (int l = 0; l < shape.n_layers; ++l) {
    LayerKv& L = c.layers[l];
    L.geom = shape.layer(l);
    const int kd = L.geom.k_dim, vd = L.geom.v_dim, n_kv = L.geom.n_kv_heads;
    const CodecSpec ks = config.k_for(l, shape.n_layers), vs = config.v_for(l, shape.n_layers);
    if (ks.rotate || vs.rotate || ks.kind == CodecKind::TQ || vs.kind == CodecKind::TQ) {
      L.rotation = std::make_shared<const Rotation>(kd, rotation_seed(config, l));
      L.v_rotation =
          vd == kd ? L.rotation : std::make_shared<const Rotation>(vd, rotation_seed(config, l));
    }
    L.k_codec = make_codec(ks, kd, L.rotation);
    L.v_codec = make_codec(vs, vd, L.v_rotation);
    L.f16_k = make_codec(CodecSpec{CodecKind::F16}, kd, nullptr);
    L.f16_v = make_codec(CodecSpec{CodecKind::F16}, vd, nullptr);
    L.k_head_bytes = L.k_codec->page_bytes(c.P);
    L.v_head_bytes = L.v_codec->page_bytes(c.P);
    L.page_bytes = size_t(n_kv) * (L.k_head_bytes + L.v_head_bytes);
    // Layers that select keep summaries (the first select_dense_layers read
    // every page; a window layer reads only its window's).
    if (config.select > 0 && l >= config.select_dense_layers && L.geom.window == 0) {
      L.summary_head = summary_head_bytes(kd);
      L.summaries.init(n_kv, L.summary_head);
      L.open_lo.resize(size_t(n_kv) * kd);
      L.open_hi.resize(L.open_lo.size());
      L.open_page.assign(size_t(n_kv), -1);
      L.open_filled.assign(size_t(n_kv), 0);
    }
    L.sinks = make_area(*c.pool, L, c.S);
    L.ring = make_area(*c.pool, L, c.R);
  }
  c.states.init(c.pool, shape.recurrent);
  c.layer_state.assign(shape.n_layers, 0);
}

KvCache::Impl::~Impl() {
  for (auto& L : layers) {
    for (uint8_t* p : L.pages) pool->release(p, L.page_bytes);
    pool->release(L.sinks.data, L.sinks.total_bytes());
    pool->release(L.ring.data, L.ring.total_bytes());
  }
}

KvCache::~KvCache() = default;

const std::shared_ptr<PagePool>& KvCache::pool() const {
  return impl_->pool;
}

const KvShape& KvCache::shape() const {
  return impl_->shape;
}
const KvConfig& KvCache::config() const {
  return impl_->config;
}
int64_t KvCache::n_tokens() const {
  return impl_->n_tokens;
}
int64_t KvCache::room() const {
  const Impl& c = *impl_;
  return c.W > 0 ? std::numeric_limits<int64_t>::max() : c.shape.max_tokens - c.n_tokens;
}

void KvCache::begin_chunk(int n_new) {
  Impl& c = *impl_;
  TKV_CHECK(!c.in_chunk);
  if (n_new <= 0) fail("KV cache: a chunk needs at least one token");
  // Under a window policy memory stays flat, so the sequence may outgrow
  // the configured context; otherwise the context is a hard limit.
  if (n_new > room())
    fail("context full: ", c.n_tokens, " + ", n_new, " tokens, the context holds ",
         c.shape.max_tokens, " (a window policy lets a sequence run past it)");
  if (c.R > 0) {  // the chunk's f16 tokens (scratch, no state), as wide as the widest layer's
    size_t bytes = 0;
    for (const LayerKv& L : c.layers) bytes = std::max(bytes, area_layout(L, n_new).total_bytes());
    c.chunk = area_layout(c.layers[0], n_new);
    c.chunk.data = c.chunk_buffer.reserve(bytes);
    c.note_scratch();
  }
  // Recurrent states a fork shares are copied first (the copies stand even
  // if the pages below do not fit: same bytes, the sequence unchanged).
  c.states.make_private();
  // Every page this chunk will fill, and a private copy of a shared page it
  // will write into (copy-on-write), is allocated here, before anything
  // changes, so running out of budget leaves the cache exactly as it was.
  // Positions [S + encoded, hi) are encoded by this chunk.
  const int64_t ring_lo = c.S + c.layers[0].encoded;
  const int64_t hi = std::max<int64_t>(ring_lo, c.n_tokens + n_new - c.R);
  std::vector<std::pair<LayerKv*, uint8_t*>> fresh;
  struct Copy {
    LayerKv* L;
    size_t slot;  // in L->pages
    uint8_t* page;
  };
  std::vector<Copy> copies;
  try {
    for (auto& L : c.layers) {
      TKV_CHECK(c.S + L.encoded == ring_lo);
      const int64_t first = L.encoded / c.P - L.first_page;  // page receiving position ring_lo
      if (hi > ring_lo && first >= 0 && first < int64_t(L.pages.size()) &&
          c.pool->refcount(L.pages[size_t(first)]) > 1)
        copies.push_back({&L, size_t(first), c.pool->allocate(L.page_bytes, true)});
      const int64_t need = (hi - c.S + c.P - 1) / c.P - L.first_page;
      for (int64_t i = int64_t(L.pages.size()); i < need; ++i)
        fresh.emplace_back(&L, c.pool->allocate(L.page_bytes, true));
    }
  } catch (...) {
    for (auto& [L, p] : fresh) c.pool->release(p, L->page_bytes);
    for (auto& cp : copies) c.pool->release(cp.page, cp.L->page_bytes);
    throw;
  }
  for (size_t i = 0; i < copies.size(); ++i) {
    Copy& cp = copies[i];
    uint8_t*& slot = cp.L->pages[cp.slot];
    try {
      PagePins pins(*c.pool, {slot, cp.page}, nullptr, true);  // either may be on disk
      std::memcpy(cp.page, slot, cp.L->page_bytes);
    } catch (...) {  // the copies made so far stand (same bytes); the rest is undone
      for (size_t j = i; j < copies.size(); ++j)
        c.pool->release(copies[j].page, copies[j].L->page_bytes);
      for (auto& [L, p] : fresh) c.pool->release(p, L->page_bytes);
      throw;
    }
    c.pool->release(slot, cp.L->page_bytes);  // the other holders keep theirs
    slot = cp.page;
  }
  for (auto& [L, p] : fresh) {
    L->pages.push_back(p);
    if (L->summary_head > 0) L->summaries.push_back();
  }
  c.in_chunk = true;
  c.chunk_n = n_new;
  c.ring_lo = ring_lo;
  std::fill(c.layer_state.begin(), c.layer_state.end(), 0);
  for (LayerKv& L : c.layers) L.held = F16Area{};
}

void KvCache::write(int layer, const float* k, const float* v, ThreadPool* pool) {
  Impl& c = *impl_;
  TKV_CHECK(c.in_chunk && layer >= 0 && layer < c.shape.n_layers && c.layer_state[layer] == 0);
  LayerKv& L = c.layers[layer];
  const int n = c.chunk_n, n_kv = L.geom.n_kv_heads;
  const int64_t n0 = c.n_tokens, S = c.S, R = c.R;
  if (R > 0) c.chunk = area_layout(L, n, c.chunk.data);  // this layer's layout of the chunk

  // Positions that leave (or never enter) the residual window by the end of
  // this chunk are encoded into pages now: [lo, hi). lo is max(S, n0 - R)
  // unless a truncate() left the ring holding fewer than R tokens.
  const int64_t lo = S + L.encoded, hi = std::max(lo, n0 + n - R);
  TKV_CHECK(lo == c.ring_lo);
  write_f16(c, L, k, v);

  // Encode [lo, hi). Tasks are (page, head) pairs: codecs may pack several
  // tokens into one byte, so two threads never write the same page region.
  const int64_t first_index = lo > S ? (lo - S) / c.P : 0;
  const int64_t n_pages = hi > lo ? (hi - 1 - S) / c.P - first_index + 1 : 0;
  auto encode_task = [&](int64_t task, int) {
    const int64_t index = first_index + task / n_kv;
    encode_page_head(c, L, k, v, lo, hi, index, int(task % n_kv),
                     index == first_index + n_pages - 1);
  };
  // The pages written (and summarized) stay in RAM while the tasks run.
  std::vector<uint8_t*> written;
  for (int64_t i = 0; i < n_pages; ++i)
    written.push_back(L.pages[size_t(first_index + i - L.first_page)]);
  PagePins pins(*c.pool, std::move(written), pool, true);
  if (pool)
    pool->run(n_pages * n_kv, encode_task);
  else
    for (int64_t t = 0; t < n_pages * n_kv; ++t) encode_task(t, 0);
  L.encoded = hi - S;
  c.layer_state[layer] = 1;
}

void KvCache::attend(int layer, const float* q, float* out, ThreadPool& pool,
                     const AttendOptions& options) {
  attend(layer, q, out, pool, impl_->own_scratch, options);
}

void KvCache::attend(int layer, const float* q, float* out, ThreadPool& pool,
                     AttentionScratch& scratch, const AttendOptions& options) {
  Impl& c = *impl_;
  TKV_CHECK(c.in_chunk && layer >= 0 && layer < c.shape.n_layers && c.layer_state[layer] == 1);
  TKV_CHECK(options.softcap >= 0.0f);
  attend_layer(c, layer, q, out, pool, scratch, options.sinks, options.softcap);
  LayerKv& L = c.layers[layer];
  if (options.more_readers) {
    // Open for more readers: the chunk's f16 tokens move out of the shared
    // area (the next layer's write lays its own out there); the residual
    // ring is committed by the last reader.
    if (c.R > 0 && L.held.data == nullptr) {
      L.held = c.chunk;
      L.held.data = L.held_buffer.reserve(c.chunk.total_bytes());
      std::memcpy(L.held.data, c.chunk.data, c.chunk.total_bytes());
      c.note_scratch();
    }
    return;
  }
  c.commit_recent(layer);
  L.held = F16Area{};
  // The next layer's pages (after the last, the first layer's: the next
  // chunk's) are read back while the model computes up to its attention.
  if (c.pool->spilling()) read_ahead_layer(c, (layer + 1) % c.shape.n_layers);
}

void KvCache::Impl::commit_recent(int layer) {
  Impl& c = *this;
  // The chunk's newest tokens become the residual ring of this layer.
  LayerKv& L = c.layers[layer];
  if (c.R > 0) {
    const int64_t n0 = c.n_tokens, n1 = n0 + c.chunk_n;
    const F16Area& chunk = c.chunk_of(L);
    for (int64_t j = std::max<int64_t>({c.S, n1 - c.R, n0}); j < n1; ++j) {
      const int rs = int((j - c.S) % L.ring.capacity), cs = int(j - n0);
      for (int h = 0; h < L.geom.n_kv_heads; ++h) {
        L.f16_k->copy_slot(chunk.k(h), chunk.capacity, cs, L.ring.k(h), L.ring.capacity, rs);
        L.f16_v->copy_slot(chunk.v(h), chunk.capacity, cs, L.ring.v(h), L.ring.capacity, rs);
      }
    }
  }
  c.layer_state[layer] = 2;
}

void KvCache::end_chunk() {
  Impl& c = *impl_;
  TKV_CHECK(c.in_chunk);
  for (int l = 0; l < c.shape.n_layers; ++l)
    if (c.layer_state[l] != 2) fail("internal error: layer ", l, " was not written and attended");
  c.n_tokens += c.chunk_n;
  c.in_chunk = false;
  c.chunk_n = 0;
  // Window policy (or a window layer keeping only its window): drop pages
  // no future query can see.
  for (auto& L : c.layers) {
    if (!c.evicts(L)) continue;
    // Only whole encoded pages: a window shorter than the residual ring
    // leaves tokens still to be encoded into the page after them.
    const int64_t visible_lo = std::min(c.kept_from(L, c.n_tokens), c.S + L.encoded);
    while (!L.pages.empty() && c.S + (L.first_page + 1) * c.P <= visible_lo) {
      c.pool->release(L.pages.front(), L.page_bytes);
      L.pages.pop_front();
      if (!L.summaries.empty()) L.summaries.pop_front();
      ++L.first_page;
    }
  }
}

float* KvCache::state(int r) {
  TKV_CHECK(r >= 0 && r < impl_->states.count());
  return impl_->states.data(r);
}

const float* KvCache::state(int r) const {
  TKV_CHECK(r >= 0 && r < impl_->states.count());
  return impl_->states.data(r);
}

PagePins KvCache::pin_state(int r) {
  TKV_CHECK(r >= 0 && r < impl_->states.count());
  return PagePins(*impl_->pool, {impl_->states.allocations()[size_t(r)]}, nullptr, true);
}

uint64_t KvCache::Impl::snapshot_bytes() const {
  uint64_t s = 0;
  for (const Snapshot& snap : snapshots) s += snap.states->bytes_apart_from(states);
  return s;
}

void KvCache::snapshot() {
  Impl& c = *impl_;
  TKV_CHECK(!c.in_chunk);
  if (c.states.count() == 0 || c.config.state_snapshots <= 0 || c.n_tokens == 0) return;
  if (!c.snapshots.empty() && c.snapshots.back().position == c.n_tokens) return;
  auto s = std::make_unique<RecurrentStates>();
  s->share(c.states);
  c.snapshots.push_back({c.n_tokens, std::move(s)});
  // The newest two stay (a prompt's start and end: a regenerated reply, an
  // edited last message); of the older ones, the one whose neighbours are
  // closest goes (the older of equals), so that those kept stay spread out
  // over the sequence and a cut anywhere feeds again as little as may be.
  auto& kept = c.snapshots;
  const size_t protect = std::min<size_t>(2, size_t(c.config.state_snapshots));
  while (int(kept.size()) > c.config.state_snapshots) {
    size_t victim = 0;
    int64_t closest = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i + protect < kept.size(); ++i) {
      const int64_t gap = kept[i + 1].position - (i == 0 ? 0 : kept[i - 1].position);
      if (gap < closest) {
        closest = gap;
        victim = i;
      }
    }
    kept.erase(kept.begin() + ptrdiff_t(victim));
  }
}

int64_t KvCache::restore_point(int64_t n) const {
  const Impl& c = *impl_;
  n = std::clamp<int64_t>(n, 0, c.n_tokens);
  if (can_truncate(n)) return n;
  int64_t best = 0;
  for (const Impl::Snapshot& s : c.snapshots)
    if (s.position <= n) best = std::max(best, s.position);
  return best;
}

namespace {

// Whether recurrent states can be at n: none, or a snapshot there.
bool states_reach(const KvCache::Impl& c, int64_t n) {
  return c.states.count() == 0 ||
         std::any_of(c.snapshots.begin(), c.snapshots.end(),
                     [&](const KvCache::Impl::Snapshot& s) { return s.position == n; });
}

// The first layer that already dropped positions a query at n must see
// ([max(S, kept_from(n)), n]: a window policy or --kv-swa window), or -1.
int layer_missing(const KvCache::Impl& c, int64_t n) {
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const LayerKv& L = c.layers[l];
    if (L.first_page > 0 && std::max<int64_t>(c.S, c.kept_from(L, n)) < c.S + L.first_page * c.P)
      return int(l);
  }
  return -1;
}

}  // namespace

bool KvCache::can_truncate(int64_t n) const {
  const Impl& c = *impl_;
  if (n < 0 || n > c.n_tokens) return false;
  if (n == c.n_tokens || n == 0) return true;
  return states_reach(c, n) && layer_missing(c, n) < 0;
}

void KvCache::truncate(int64_t n) {
  Impl& c = *impl_;
  TKV_CHECK(!c.in_chunk);
  if (n < 0 || n > c.n_tokens)
    fail("KV cache: cannot truncate to ", n, " tokens: the sequence holds ", c.n_tokens);
  if (n == c.n_tokens) return;
  if (n == 0) return clear();
  if (!states_reach(c, n))
    fail("KV cache: cannot truncate to ", n, " tokens: the recurrent layers' state holds position ",
         c.n_tokens, " and snapshots at ", snapshot_positions(c), " only (restore_point() says ",
         "where truncate can go)");
  if (const int l = layer_missing(c, n); l >= 0)
    fail("KV cache: cannot truncate to ", n,
         " tokens: ", c.W > 0 ? "the window policy" : str("window layer ", l, " (--kv-swa window)"),
         " already dropped positions [", c.S, ", ", c.S + c.layers[size_t(l)].first_page * c.P,
         ")");
  for (auto& L : c.layers) {
    // Pages keep positions below n: their slots at or beyond n are stale and
    // are rewritten in full by the next encode (Codec::encode touches only
    // its slot's bytes and all of them). The ring keeps [S + encoded, n).
    L.encoded = std::clamp<int64_t>(n - c.S, 0, L.encoded);
    const int64_t keep = (L.encoded + c.P - 1) / c.P - L.first_page;
    while (int64_t(L.pages.size()) > keep) {
      c.pool->release(L.pages.back(), L.page_bytes);
      L.pages.pop_back();
      if (!L.summaries.empty()) L.summaries.pop_back();
    }
    std::fill(L.open_page.begin(), L.open_page.end(), -1);
    // The last page may have lost tokens: its summary covers what it keeps.
    const int64_t last_filled = L.encoded - (L.first_page + int64_t(L.pages.size()) - 1) * c.P;
    if (L.summary_head > 0 && !L.pages.empty() && last_filled > 0 && last_filled < c.P) {
      PagePins pins(*c.pool, {L.pages.back()});
      L.summarize_page(L.pages.size() - 1, L.geom.n_kv_heads, c.P, int(last_filled));
    }
  }
  if (c.states.count() > 0) {  // back to the snapshot at n; later ones no longer apply
    std::erase_if(c.snapshots, [&](const Impl::Snapshot& snap) { return snap.position > n; });
    c.states.share(*c.snapshots.back().states);
  }
  c.n_tokens = n;
}

std::unique_ptr<KvCache> KvCache::fork() const {
  const Impl& c = *impl_;
  TKV_CHECK(!c.in_chunk);
  // The new sequence's sinks and ring come from the pool (may throw
  // KvBudgetExceeded; this sequence is not touched either way).
  // The recurrent states are shared below, not allocated anew.
  KvShape bare = c.shape;
  bare.recurrent.clear();
  auto f = std::make_unique<KvCache>(bare, c.config, c.pool);
  Impl& d = *f->impl_;
  d.shape.recurrent = c.shape.recurrent;
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const LayerKv& from = c.layers[l];
    LayerKv& to = d.layers[l];
    if (from.sinks.data) std::memcpy(to.sinks.data, from.sinks.data, from.sinks.total_bytes());
    if (from.ring.data) std::memcpy(to.ring.data, from.ring.data, from.ring.total_bytes());
    for (uint8_t* p : from.pages) {
      c.pool->retain(p);
      to.pages.push_back(p);
    }
    to.summaries = from.summaries;
    to.first_page = from.first_page;
    to.encoded = from.encoded;
  }
  d.states.share(c.states);
  for (const Impl::Snapshot& s : c.snapshots) {
    auto copy = std::make_unique<RecurrentStates>();
    copy->share(*s.states);
    d.snapshots.push_back({s.position, std::move(copy)});
  }
  d.n_tokens = c.n_tokens;
  return f;
}

void KvCache::clear() {
  Impl& c = *impl_;
  TKV_CHECK(!c.in_chunk);
  // First: a fork's shared states are replaced by fresh ones, which may not
  // fit the budget (KvBudgetExceeded), and then nothing but the snapshots
  // (which would share the states and make them look shared) may have changed.
  c.snapshots.clear();
  c.states.reset();
  for (auto& L : c.layers) {
    for (uint8_t* p : L.pages) c.pool->release(p, L.page_bytes);
    L.pages.clear();
    L.summaries.clear();
    std::fill(L.open_page.begin(), L.open_page.end(), -1);
    L.first_page = 0;
    L.encoded = 0;
  }
  if (c.private_pool) c.pool->trim();
  c.n_tokens = 0;
}

void KvCache::abandon_chunk() {
  Impl& c = *impl_;
  c.in_chunk = false;
  c.chunk_n = 0;
  clear();
}

KvStats KvCache::stats() const {
  const Impl& c = *impl_;
  KvStats s;
  s.n_tokens = c.n_tokens;
  const int64_t non_sink = std::max<int64_t>(0, c.n_tokens - c.S);
  s.tokens_kept =
      std::min<int64_t>(c.n_tokens, c.S) + (c.W > 0 ? std::min<int64_t>(c.W, non_sink) : non_sink);
  for (const auto& L : c.layers) {
    for (const uint8_t* p : L.pages) {
      if (c.pool->refcount(p) > 1) s.shared_bytes += L.page_bytes;
      if (c.pool->spilling() && !c.pool->resident(p)) s.page_bytes_on_disk += L.page_bytes;
    }
    const uint64_t pages = uint64_t(L.pages.size()) * L.page_bytes;
    const uint64_t f16 = L.sinks.total_bytes() + L.ring.total_bytes();
    const uint64_t summaries = L.summaries.bytes();
    s.page_bytes += pages;
    s.f16_bytes += f16;
    s.summary_bytes += summaries;
    s.layer_bytes.push_back(pages + f16 + summaries);
    s.pages_allocated += int64_t(L.pages.size());
  }
  s.state_bytes = c.states.total_bytes();
  s.shared_bytes += c.states.shared_bytes();
  s.snapshot_bytes = c.snapshot_bytes();
  s.snapshots = int(c.snapshots.size());
  s.persistent_bytes =
      s.page_bytes + s.f16_bytes + s.summary_bytes + s.state_bytes + s.snapshot_bytes;
  s.exclusive_bytes = s.persistent_bytes - s.shared_bytes;
  s.select_page_reads = c.select_page_reads;
  s.page_bytes_read = c.page_bytes_read;
  s.select_dense_page_reads = c.select_dense_page_reads;
  s.scratch_bytes = c.scratch_bytes();
  s.peak_scratch_bytes = std::max(c.peak_scratch, s.scratch_bytes);
  if (!c.layers.empty()) {
    s.k_bytes_per_token_head = c.layers[0].k_codec->bytes_per_vector(c.P);
    s.v_bytes_per_token_head = c.layers[0].v_codec->bytes_per_vector(c.P);
  }
  return s;
}

void KvCache::reset_peak_scratch() {
  impl_->peak_scratch = impl_->scratch_bytes();
}

}  // namespace tkv::kv
