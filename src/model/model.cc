#include "model/model.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <thread>

#include "common/error.h"
#include "common/mapped_file.h"
#include "common/sys_info.h"
#include "tensor/matmul.h"

namespace tkv::model {

namespace {

// Rows of logits computed per output-matrix product when every position's
// logits are wanted: enough tokens to reuse each weight block several times,
// few enough that the buffer stays small (16 x 128K vocab = 8 MiB).
constexpr int kLogitsRows = 16;
// The FFN runs at most ffn_rows(...) rows at a time: its hidden activations
// (2 x rows x n_ff floats) are the largest scratch of a prefill, 32 MiB for
// 512 rows of a 2048 x 8192 model. 256 rows reuse each weight block enough
// for the f32 GEMM and the integer tiles; the AMX kernel converts the
// weights once per call and takes 512 (matmul_rows_per_call).
int ffn_rows(const ModelWeights& w) {
  int64_t rows = 0;
  for (const LayerWeights& L : w.layers)
    for (const WeightMatrix* m : {&L.w_gate, &L.w_up, &L.w_down})
      rows = std::max(rows, matmul_rows_per_call(m->type));
  return int(rows);
}

// out = in W^T for `rows` rows (row strides w.cols and w.rows). exact: the
// matvec-identical kernels (matvec_batch: the integer-dot path for
// quantized weights, matvec's accumulation order for float weights, the
// weights streamed once for all rows); else matmul's prefill kernel
// (prefill_kernel: the f32 GEMM, or the integer-dot token tiles where they
// are faster), chosen by the weight type and SIMD target alone, also for
// the one row the last layer keeps of a large item (keep_logit_rows);
// either's per-row result does not depend on `rows`.
void product(const WeightMatrix& w, const float* in, int rows, float* out, bool exact,
             ThreadPool& pool) {
  if (rows <= 0) return;
  if (!exact) return matmul(w, in, rows, out, pool, prefill_kernel(w.type));
  if (rows == 1) return matvec(w, in, out, pool);
  matvec_batch(w, in, rows, out, pool);
}

// The rows [0, n_exact) take the exact kernels, [n_exact, n_rows) the GEMM.
void project(const WeightMatrix& w, const float* in, int n_exact, int n_rows, float* out,
             ThreadPool& pool) {
  product(w, in, n_exact, out, true, pool);
  product(w, in + size_t(n_exact) * w.cols, n_rows - n_exact, out + size_t(n_exact) * w.rows, false,
          pool);
}

// fn(matrix) for each weight matrix once: token_embd, output unless tied
// to it (the same bytes), each layer's seven. Weights: ModelWeights, const
// or not.
template <class Weights, class Fn>
void for_each_distinct_matrix(Weights& w, bool tied_output, Fn fn) {
  fn(w.token_embd);
  if (!tied_output) fn(w.output);
  for (auto& L : w.layers)
    for (auto* m : L.matrices()) fn(*m);
}

// The status of an item whose check or allocation threw `e`.
ItemStatus failed(ItemStatus::Code code, const std::exception& e) {
  ItemStatus st;
  st.code = code;
  st.message = e.what();
  st.error = std::current_exception();
  return st;
}

}  // namespace

Model::~Model() = default;

const char* weight_memory_name(WeightMemory memory) {
  switch (memory) {
    case WeightMemory::kMap:
      return "map";
    case WeightMemory::kCopy:
      return "copy";
    case WeightMemory::kAuto:
      break;
  }
  return "auto";
}

std::optional<WeightMemory> parse_weight_memory(std::string_view name) {
  for (WeightMemory m : {WeightMemory::kAuto, WeightMemory::kMap, WeightMemory::kCopy})
    if (name == weight_memory_name(m)) return m;
  return std::nullopt;
}

FileMemory choose_file_memory(WeightMemory want, uint64_t file_bytes, bool thp,
                              uint64_t available) {
  switch (want) {
    case WeightMemory::kMap:
      return FileMemory::kMap;
    case WeightMemory::kCopy:
      return FileMemory::kCopy;
    case WeightMemory::kAuto:
      break;
  }
  constexpr uint64_t kMinCopyBytes = uint64_t(64) << 20;
  const bool fits = available > 0 && file_bytes <= available / 4 * 3;
  return thp && fits && file_bytes >= kMinCopyBytes ? FileMemory::kCopy : FileMemory::kMap;
}

std::unique_ptr<Model> Model::load(const std::string& path, WeightMemory memory) {
  std::unique_ptr<Model> m(new Model());
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  const FileMemory how =
      choose_file_memory(memory, ec ? 0 : uint64_t(bytes), transparent_huge_pages_available(),
                         available_memory_bytes());
  m->file_ = gguf::GgufFile::open(path, how);
  m->config_ = ModelConfig::from_gguf(m->file_);
  m->weights_ = ModelWeights::bind(m->file_, m->config_);
  if (how == FileMemory::kCopy) m->reorder_weights();
  m->rope_ = ops::RopeFrequencies::make(m->config_, m->weights_.rope_freq_factors);
  m->fingerprint_ = compute_fingerprint(m->file_);
  return m;
}

void Model::reorder_weights() {
  MappedFile& copy = *file_.mapping();
  // Every core (the load is a one-off; ~0.5 s for 2.3 GiB on one core).
  ThreadPool pool(int(std::max(1u, std::thread::hardware_concurrency())));
  copy.rewrite([&](uint8_t* bytes) {
    for_each_distinct_matrix(weights_, config_.tied_output, [&](WeightMatrix& w) {
      if (row_blocks_pay_off(w)) w = to_row_blocks(w, bytes + (w.data - copy.data()), pool);
    });
  });
  if (config_.tied_output) weights_.output = weights_.token_embd;
}

int Model::row_block_matrices() const {
  int n = 0;
  for_each_distinct_matrix(weights_, config_.tied_output, [&](const WeightMatrix& w) {
    n += w.layout == RowLayout::kRowBlocks16 ? 1 : 0;
  });
  return n;
}

std::string Model::describe_weights() const {
  std::string s = describe(file_memory());
  if (row_block_matrices() > 0) s += ", F16 matrices as row blocks";
  return s;
}

void Model::fault_in_weights(const std::atomic<bool>* stop) const {
  if (file_memory() == FileMemory::kCopy) return;  // read at load
  // Pieces of 16 MiB: a stop waits at most for one (~20 ms from the page
  // cache on a VM that traps each first touch, ~0.1 s from a fast disk).
  constexpr size_t kPiece = size_t(16) << 20;
  const auto stopped = [&] { return stop != nullptr && stop->load(std::memory_order_relaxed); };
  auto matrix = [&](const WeightMatrix& w) {
    const size_t bytes = w.total_bytes();
    for (size_t at = 0; at < bytes && !stopped(); at += kPiece)
      fault_in(w.data + at, std::min(kPiece, bytes - at));
  };
  for (const LayerWeights& L : weights_.layers)
    for (const WeightMatrix* w : L.matrices()) matrix(*w);
  matrix(weights_.output);
}

kv::KvShape Model::kv_shape(int ctx) const {
  kv::KvShape s;
  s.n_layers = config_.n_layers;
  s.n_heads = config_.n_heads;
  s.n_kv_heads = config_.n_kv_heads;
  s.head_dim = config_.head_dim;
  s.max_tokens = ctx > 0 ? ctx : config_.n_ctx_train;
  return s;
}

uint64_t Model::scratch_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return context_.activation_bytes() + activation_scratch_bytes();
}

void Model::check_item(const kv::KvCache& cache, std::span<const int32_t> tokens) const {
  const ModelConfig& c = config_;
  const kv::KvShape& shape = cache.shape();
  if (shape.n_layers != c.n_layers || shape.n_heads != c.n_heads ||
      shape.n_kv_heads != c.n_kv_heads || shape.head_dim != c.head_dim) {
    fail("KV cache shape (", shape.n_layers, " layers, ", shape.n_heads, "/", shape.n_kv_heads,
         " heads x ", shape.head_dim, ") does not match the model (", c.n_layers, " layers, ",
         c.n_heads, "/", c.n_kv_heads, " heads x ", c.head_dim, ")");
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.n_vocab) {
      fail("token id ", tokens[i], " at index ", i, " is outside the vocabulary (", c.n_vocab,
           " tokens)");
    }
  }
  const int64_t pos0 = cache.n_tokens();
  const int64_t n = int64_t(tokens.size());
  if (pos0 + n > shape.max_tokens) {
    fail("context too long: ", n, " tokens at position ", pos0, " would need ", pos0 + n,
         " positions, the context holds ", shape.max_tokens);
  }
}

void Model::eval(kv::KvCache& cache, std::span<const int32_t> tokens, ThreadPool& pool,
                 const LogitsSink& sink, const EvalOptions& opts) const {
  check_item(cache, tokens);
  if (opts.ubatch < 1) fail("ubatch must be at least 1 (got ", opts.ubatch, ")");
  const int64_t n = int64_t(tokens.size());
  if (n == 0) return;

  std::lock_guard<std::mutex> lock(mu_);
  context_.sequence_scratch_ = true;
  BatchLogitsSink batch_sink;
  if (sink) batch_sink = [&](size_t, int64_t pos, std::span<const float> l) { sink(pos, l); };
  for (int64_t done = 0; done < n; done += opts.ubatch) {
    const int64_t T = std::min<int64_t>(opts.ubatch, n - done);
    BatchItem item;
    item.sequence = &cache;
    item.tokens = tokens.subspan(size_t(done), size_t(T));
    item.logits = opts.all_logits           ? Logits::kAll
                  : (sink && done + T == n) ? Logits::kLast
                                            : Logits::kNone;
    const auto status =
        eval_batch(context_, std::span<const BatchItem>(&item, 1), pool, batch_sink);
    if (!status[0].ok()) std::rethrow_exception(status[0].error);
    if (opts.on_chunk) opts.on_chunk(done + T, n);
  }
}

std::vector<float> Model::eval_last(kv::KvCache& cache, std::span<const int32_t> tokens,
                                    ThreadPool& pool, int ubatch) const {
  std::vector<float> out;
  EvalOptions opts;
  opts.ubatch = ubatch;
  eval(
      cache, tokens, pool,
      [&](int64_t, std::span<const float> logits) { out.assign(logits.begin(), logits.end()); },
      opts);
  return out;
}

std::vector<ItemStatus> Model::eval_batch(ExecutionContext& ctx, std::span<const BatchItem> items,
                                          ThreadPool& pool, const BatchLogitsSink& sink) const {
  const ModelConfig& c = config_;
  const int E = c.n_embd, n_layers = c.n_layers;
  std::vector<ItemStatus> status(items.size());
  ctx.live_.clear();
  ctx.logits_slot_.assign(items.size(), -1);

  // Checks and page allocation, item by item: a failure leaves its sequence
  // as it was and the item out of the batch. Small items first, so that the
  // rows taking the exact kernels are contiguous.
  std::vector<ExecutionContext::LiveItem> small, large;
  for (size_t i = 0; i < items.size(); ++i) {
    const BatchItem& it = items[i];
    const int lb = it.layer_begin, le = it.layer_end == 0 ? n_layers : it.layer_end;
    int64_t pos0 = 0;
    try {
      if (it.sequence == nullptr) fail("batch item ", i, " has no sequence");
      for (size_t j = 0; j < i; ++j) {
        if (items[j].sequence == it.sequence)
          fail("batch item ", i, " holds the same sequence as item ", j);
      }
      if (lb < 0 || le <= lb || le > n_layers)
        fail("batch item ", i, ": layers [", lb, ", ", le, ") are not a range of the model's ",
             n_layers);
      if ((lb > 0 || le < n_layers) && it.carry == nullptr)
        fail("batch item ", i, ": a part of a layer-split chunk needs a carry buffer");
      if (le < n_layers && it.logits != Logits::kNone)
        fail("batch item ", i, ": a part that stops before the last layer has no logits");
      check_item(*it.sequence, it.tokens);
      if (it.tokens.empty()) continue;
      if (lb > 0 && it.carry->size() != it.tokens.size() * size_t(E))
        fail("batch item ", i, ": its carry holds ", it.carry->size(), " floats, not the ",
             it.tokens.size(), " rows of the chunk");
      pos0 = it.sequence->n_tokens();
      if (it.tokens.size() > size_t(std::numeric_limits<int>::max() / 2))
        fail("batch item ", i, " has too many tokens (", it.tokens.size(), ")");
      if (lb == 0) it.sequence->begin_chunk(int(it.tokens.size()));
    } catch (const kv::KvBudgetExceeded& e) {
      status[i] = failed(ItemStatus::Code::kBudgetExceeded, e);
      continue;
    } catch (const kv::KvOutOfMemory& e) {
      status[i] = failed(ItemStatus::Code::kOutOfMemory, e);
      continue;
    } catch (const Error& e) {
      status[i] = failed(ItemStatus::Code::kInvalid, e);
      continue;
    }
    ExecutionContext::LiveItem live;
    live.index = i;
    live.n_rows = int(it.tokens.size());
    live.pos0 = pos0;
    live.exact = int64_t(it.tokens.size()) <= kIntMatmulMaxTokens;
    live.layer_begin = lb;
    live.layer_end = le;
    (live.exact ? small : large).push_back(live);
  }
  int n_rows = 0, n_exact = 0;
  for (auto* group : {&small, &large}) {
    for (auto& live : *group) {
      live.row0 = live.home = n_rows;
      n_rows += live.n_rows;
      ctx.live_.push_back(live);
    }
    if (group == &small) n_exact = n_rows;
  }
  if (n_rows == 0) return status;

  ctx.reserve(c, n_rows, ffn_rows(weights_));
  // Embedding lookup (row `token` of token_embd, dequantized), or the rows
  // an earlier part of the chunk left in its carry.
  const WeightMatrix& emb = weights_.token_embd;
  for (const auto& live : ctx.live_) {
    const BatchItem& it = items[live.index];
    float* x = ctx.x_.data() + size_t(live.row0) * E;
    if (live.layer_begin > 0) {
      std::copy(it.carry->begin(), it.carry->end(), x);
      continue;
    }
    for (int t = 0; t < live.n_rows; ++t) weight_row(emb, it.tokens[size_t(t)], x + size_t(t) * E);
  }
  // The RoPE angles of each row's position, once per layout of the rows.
  const size_t pairs = size_t(c.n_rot / 2);
  const auto rope_rows = [&] {
    for (const auto& live : ctx.live_)
      ops::rope_angles(rope_, live.pos0, live.n_rows, ctx.rope_cos_.data() + live.row0 * pairs,
                       ctx.rope_sin_.data() + live.row0 * pairs);
  };

  // Phases: runs of layers over which the same items run. Without
  // layer-split items there is one, over every row; else each phase packs
  // its items' rows into x_ (exact rows first, as above) from x_all_, where
  // every item's rows wait between the phases it is in.
  std::vector<int> cuts = {0, n_layers};
  for (const auto& live : ctx.live_) {
    cuts.push_back(live.layer_begin);
    cuts.push_back(live.layer_end);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  const bool split = cuts.size() > 2;
  const std::vector<ExecutionContext::LiveItem> all = ctx.live_;
  if (split) {
    ctx.x_all_.assign(ctx.x_.begin(), ctx.x_.begin() + ptrdiff_t(size_t(n_rows) * E));
  } else {
    rope_rows();
  }
  const auto home = [&](const ExecutionContext::LiveItem& live) {
    return ctx.x_all_.data() + size_t(live.home) * E;
  };
  // Appends an item's waiting rows to x_ at row `rows` (and to live_).
  const auto place = [&](ExecutionContext::LiveItem live, int& rows) {
    live.row0 = rows;
    std::copy(home(live), home(live) + size_t(live.n_rows) * E, ctx.x_.data() + size_t(rows) * E);
    rows += live.n_rows;
    ctx.live_.push_back(live);
  };
  for (size_t p = 0; p + 1 < cuts.size(); ++p) {
    const int l0 = cuts[p], l1 = cuts[p + 1];
    int rows = n_rows, exact = n_exact;
    if (split) {
      ctx.live_.clear();
      rows = exact = 0;
      for (const auto& live : all) {
        if (!status[live.index].ok() || live.layer_begin > l0 || live.layer_end < l1) continue;
        place(live, rows);
        if (live.exact) exact = rows;
      }
      if (rows == 0) continue;
      rope_rows();
    }
    for (int l = l0; l < l1; ++l) {
      attention_block(ctx, items, l, exact, rows, pool, status);
      if (l == n_layers - 1) keep_logit_rows(ctx, items, exact, rows);
      attention_output(ctx, l, exact, rows, pool);
      ffn_block(ctx, l, exact, rows, pool);
      check_finite(ctx.x_.data(), int64_t(rows) * E, l, "output");
    }
    // The last phase's rows stay in x_ for emit_logits (its live_ holds
    // every item through the last layer, kept rows only).
    if (split && l1 < n_layers)
      for (const auto& live : ctx.live_)
        std::copy(ctx.x_.data() + size_t(live.row0) * E,
                  ctx.x_.data() + size_t(live.row0 + live.n_rows) * E, home(live));
  }
  // Items through the last layer end their chunk (and give logits); a part
  // that stops earlier keeps its rows in its carry for the next one.
  if (split) {
    for (const auto& live : all) {
      if (!status[live.index].ok() || live.layer_end == n_layers) continue;
      items[live.index].carry->assign(home(live), home(live) + size_t(live.n_rows) * E);
    }
  }
  for (const auto& live : ctx.live_) items[live.index].sequence->end_chunk();

  emit_logits(ctx, items, pool, sink);
  ctx.note_peak();
  return status;
}

// att = Attention(RMSNorm(x)) for layer l (attention_output adds its
// projection to x); each item's K/V go into its sequence, and its queries
// attend over that sequence's pages.
void Model::attention_block(ExecutionContext& ctx, std::span<const BatchItem> items, int l,
                            int n_exact, int n_rows, ThreadPool& pool,
                            std::vector<ItemStatus>& status) const {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[size_t(l)];
  const int E = c.n_embd, D = c.head_dim;
  const int T = n_rows;
  float* q = ctx.q_.data();
  float* k = ctx.k_.data();
  float* v = ctx.v_.data();

  ops::rmsnorm_rows(ctx.x_.data(), L.attn_norm.data(), ctx.xb_.data(), T, E, c.rms_eps, pool);
  project(L.wq, ctx.xb_.data(), n_exact, T, q, pool);
  project(L.wk, ctx.xb_.data(), n_exact, T, k, pool);
  project(L.wv, ctx.xb_.data(), n_exact, T, v, pool);
  if (c.qkv_bias) {  // qwen2
    ops::add_bias_rows(q, L.bq.data(), T, c.q_dim());
    ops::add_bias_rows(k, L.bk.data(), T, c.kv_dim());
    ops::add_bias_rows(v, L.bv.data(), T, c.kv_dim());
  }
  if (c.qk_norm) {  // qwen3: every head of q and k RMS-normalized on its own, before RoPE
    ops::rmsnorm_rows(q, L.q_norm.data(), q, int64_t(T) * c.n_heads, D, c.rms_eps, pool);
    ops::rmsnorm_rows(k, L.k_norm.data(), k, int64_t(T) * c.n_kv_heads, D, c.rms_eps, pool);
  }
  const size_t pairs = size_t(c.n_rot / 2);
  for (int t = 0; t < T; ++t) {
    const float* cos_row = ctx.rope_cos_.data() + t * pairs;
    const float* sin_row = ctx.rope_sin_.data() + t * pairs;
    ops::rope_apply(rope_, q + size_t(t) * c.q_dim(), c.n_heads, D, cos_row, sin_row);
    ops::rope_apply(rope_, k + size_t(t) * c.kv_dim(), c.n_kv_heads, D, cos_row, sin_row);
  }

  // Before the codecs see them: a NaN key is the weights' fault, not the cache's.
  check_finite(k, int64_t(T) * c.kv_dim(), l, "keys");
  check_finite(v, int64_t(T) * c.kv_dim(), l, "values");
  std::vector<size_t> dropped;  // items (caller's indexes) that failed in this layer
  for (const auto& live : ctx.live_) {
    kv::KvCache& seq = *items[live.index].sequence;
    const size_t r = size_t(live.row0);
    float* out = ctx.att_.data() + r * c.q_dim();
    // With the pool's disk tier a page may fail to move (KvSpillError) or a
    // layer's pages may not fit at once (KvBudgetExceeded): that ends this
    // item only. Its rows stay in the batch (their kernels do not depend on
    // the other rows) with zero attention, and it leaves the later layers.
    try {
      seq.write(l, k + r * c.kv_dim(), v + r * c.kv_dim(), &pool);
      if (ctx.sequence_scratch_) {
        seq.attend(l, q + r * c.q_dim(), out, pool);
      } else {
        seq.attend(l, q + r * c.q_dim(), out, pool, ctx.attention_);
      }
      continue;
    } catch (const kv::KvSpillError& e) {
      status[live.index] = failed(ItemStatus::Code::kSpillError, e);
    } catch (const kv::KvBudgetExceeded& e) {
      status[live.index] = failed(ItemStatus::Code::kSpillError, e);
    } catch (const kv::KvOutOfMemory& e) {
      status[live.index] = failed(ItemStatus::Code::kSpillError, e);
    }
    seq.abandon_chunk();
    std::fill(out, out + size_t(live.n_rows) * c.q_dim(), 0.0f);
    dropped.push_back(live.index);
  }
  std::erase_if(ctx.live_, [&](const ExecutionContext::LiveItem& li) {
    return std::find(dropped.begin(), dropped.end(), li.index) != dropped.end();
  });
}

// Past the last layer's attention only the rows whose logits are wanted
// matter: every row's K/V are in its sequence by now, and nothing else of
// a row reaches the cache or the logits. So the last layer's output
// projection and FFN, ~1/n_layers of a prefill's work, run only for the last
// row of each kLast item and every row of each kAll item (none of a kNone
// chunk). The kept rows move to the front of x_ and att_ (exact items' first,
// as before) and each item's LiveItem shrinks to them; their kernels are
// their item's (product()), whose per-row results do not depend on how many
// rows a call has, so the logits are the bits the whole rows would give.
void Model::keep_logit_rows(ExecutionContext& ctx, std::span<const BatchItem> items, int& n_exact,
                            int& n_rows) const {
  const size_t E = size_t(config_.n_embd), Q = size_t(config_.q_dim());
  int rows = 0, exact = 0;
  for (auto& live : ctx.live_) {
    const Logits want = items[live.index].logits;
    const int first = want == Logits::kAll    ? 0
                      : want == Logits::kLast ? live.n_rows - 1
                                              : live.n_rows;
    const int kept = live.n_rows - first;
    // Rows only move towards the front (std::copy allows a destination
    // before its source); rows already in place stay.
    const size_t from = size_t(live.row0 + first);
    if (from != size_t(rows)) {
      std::copy_n(ctx.x_.data() + from * E, size_t(kept) * E, ctx.x_.data() + size_t(rows) * E);
      std::copy_n(ctx.att_.data() + from * Q, size_t(kept) * Q, ctx.att_.data() + size_t(rows) * Q);
    }
    live.row0 = rows;
    live.pos0 += first;
    live.n_rows = kept;
    rows += kept;
    if (live.exact) exact = rows;
  }
  n_exact = exact;
  n_rows = rows;
}

// x += att Wo for layer l (att: attention_block's output).
void Model::attention_output(ExecutionContext& ctx, int l, int n_exact, int n_rows,
                             ThreadPool& pool) const {
  const WeightMatrix& wo = weights_.layers[size_t(l)].wo;
  project(wo, ctx.att_.data(), n_exact, n_rows, ctx.xb_.data(), pool);
  ops::add(ctx.x_.data(), ctx.xb_.data(), int64_t(n_rows) * config_.n_embd);
}
void Model::check_finite(const float* values, int64_t n, int layer, const char* what) const {
  // NaN and Inf are the values whose exponent bits are all ones. Counting
  // them is an integer sum (vectorizes even on baseline SSE2, no float
  // reduction order to keep): 0.14 us per 1024 values, against the
  // milliseconds of a layer's matrix work.
  uint32_t non_finite = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, values + i, sizeof b);
    non_finite += (b & 0x7f800000u) == 0x7f800000u;
  }
  if (non_finite == 0) return;
  fail(file_.path(), ": the model file looks corrupt: NaN or Inf in layer ", layer, " ", what,
       " (broken weights; re-download or re-convert the file)");
}

// x += W_down (silu(W_gate h) * W_up h), h = RMSNorm(x), for layer l.
void Model::ffn_block(ExecutionContext& ctx, int l, int n_exact, int n_rows,
                      ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[size_t(l)];
  const int E = c.n_embd;
  float* gate = ctx.gate_.data();
  float* up = ctx.up_.data();

  ops::rmsnorm_rows(ctx.x_.data(), L.ffn_norm.data(), ctx.xb_.data(), n_rows, E, c.rms_eps, pool);
  // At most ffn_rows rows at a time (reserved by eval_batch), never mixing
  // exact and GEMM rows.
  for (int t0 = 0; t0 < n_rows;) {
    const bool exact = t0 < n_exact;
    const int rows = std::min(ctx.ffn_rows_, (exact ? n_exact : n_rows) - t0);
    float* h = ctx.xb_.data() + size_t(t0) * E;  // normed input in, FFN output out
    product(L.w_gate, h, rows, gate, exact, pool);
    product(L.w_up, h, rows, up, exact, pool);
    // Row by row: the kernel's vector body and its scalar tail may round
    // exp() differently, so where a row is split must not depend on its
    // neighbours in the batch.
    const size_t F = size_t(c.n_ff);
    if (rows == 1) {
      ops::silu_mul(gate, up, c.n_ff);
    } else {
      pool.parallel_for(rows, 1, [&](int64_t b, int64_t e, int) {
        for (int64_t r = b; r < e; ++r) ops::silu_mul(gate + r * F, up + r * F, c.n_ff);
      });
    }
    product(L.w_down, gate, rows, h, exact, pool);
    t0 += rows;
  }
  ops::add(ctx.x_.data(), ctx.xb_.data(), int64_t(n_rows) * E);
}

// Final RMSNorm and output projection for the rows the items want: the last
// row of each kLast item and every row of each kAll item, gathered (exact
// rows first) and projected kLogitsRows at a time.
void Model::emit_logits(ExecutionContext& ctx, std::span<const BatchItem> items, ThreadPool& pool,
                        const BatchLogitsSink& sink) const {
  const ModelConfig& c = config_;
  const int E = c.n_embd;
  const size_t V = size_t(c.n_vocab);
  struct Wanted {
    size_t item;
    int row;  // in x
    int64_t position;
    bool exact;
    int slot;  // in last_logits_, or -1
  };
  std::vector<Wanted> wanted;
  int n_last = 0;
  for (int pass = 0; pass < 2; ++pass) {  // exact rows first
    for (const auto& live : ctx.live_) {
      const Logits want = items[live.index].logits;
      if (want == Logits::kNone) continue;
      const bool last = want == Logits::kLast;
      const bool exact = last || live.exact;
      if (exact != (pass == 0)) continue;
      const int first = last ? live.n_rows - 1 : 0;
      for (int t = first; t < live.n_rows; ++t) {
        wanted.push_back({live.index, live.row0 + t, live.pos0 + t, exact, last ? n_last++ : -1});
      }
    }
  }
  if (wanted.empty()) return;
  ctx.n_vocab_ = c.n_vocab;
  if (ctx.last_logits_.size() < size_t(n_last) * V) ctx.last_logits_.resize(size_t(n_last) * V);
  // Sized by the rows actually wanted: a prefill that only needs its last
  // token's logits never holds kLogitsRows x n_vocab floats.
  const size_t want_floats = size_t(std::min<size_t>(wanted.size(), kLogitsRows)) * V;
  if (ctx.logits_.size() < want_floats) ctx.logits_.resize(want_floats);

  // Gather the wanted rows' final norms into xb (wanted.size() <= rows).
  for (size_t i = 0; i < wanted.size(); ++i) {
    ops::rmsnorm(ctx.x_.data() + size_t(wanted[i].row) * E, weights_.output_norm.data(),
                 ctx.xb_.data() + i * E, E, c.rms_eps);
  }
  for (size_t r0 = 0; r0 < wanted.size();) {
    const bool exact = wanted[r0].exact;
    size_t g = 1;
    while (g < size_t(kLogitsRows) && r0 + g < wanted.size() && wanted[r0 + g].exact == exact) ++g;
    product(weights_.output, ctx.xb_.data() + r0 * E, int(g), ctx.logits_.data(), exact, pool);
    for (size_t i = 0; i < g; ++i) {
      const Wanted& w = wanted[r0 + i];
      const std::span<const float> row(ctx.logits_.data() + i * V, V);
      if (w.slot >= 0) {
        std::copy(row.begin(), row.end(), ctx.last_logits_.begin() + size_t(w.slot) * V);
        ctx.logits_slot_[w.item] = w.slot;
      }
      if (sink) sink(w.item, w.position, row);
    }
    r0 += g;
  }
}

}  // namespace tkv::model
