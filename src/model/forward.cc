// Model::eval_batch: the batch around the layer loop (model/forward.h).
#include "model/forward.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "tensor/matmul.h"

namespace tkv::model {

namespace {

// The FFN runs at most ffn_rows(...) rows at a time: its hidden activations
// (2 x rows x n_ff floats) are the largest scratch of a prefill, 32 MiB for
// 512 rows of a 2048 x 8192 model. 256 rows reuse each weight block enough
// for the f32 GEMM and the integer tiles; the AMX kernel converts the
// weights once per call and takes 512 (matmul_rows_per_call).
int ffn_rows(const ModelWeights& w) {
  int64_t rows = 0;
  for (const LayerWeights& L : w.layers) {
    for (const WeightMatrix* m : {&L.w_gate, &L.w_up, &L.w_down})
      if (m->rows > 0) rows = std::max(rows, matmul_rows_per_call(m->type));
    for (const auto* experts : {&L.moe.gate, &L.moe.up, &L.moe.down})
      if (!experts->empty()) rows = std::max(rows, matmul_rows_per_call(experts->front().type));
  }
  return int(rows);
}

}  // namespace

ItemStatus failed_status(ItemStatus::Code code, const std::exception& e) {
  ItemStatus st;
  st.code = code;
  st.message = e.what();
  st.error = std::current_exception();
  return st;
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

void project(const WeightMatrix& w, const float* in, int n_exact, int n_rows, float* out,
             ThreadPool& pool) {
  product(w, in, n_exact, out, true, pool);
  product(w, in + size_t(n_exact) * w.cols, n_rows - n_exact, out + size_t(n_exact) * w.rows, false,
          pool);
}

Forward::Forward(const Model& model, ExecutionContext& ctx, std::span<const BatchItem> items,
                 ThreadPool& pool)
    : m_(model), c_(model.config_), ctx_(ctx), items_(items), pool_(pool), status_(items.size()) {}

// The forward pass, top to bottom: every admitted item's rows go through
// the layers together; an item running part of its layers (layer_begin,
// layer_end) joins the phases of the layers it runs.
std::vector<ItemStatus> Forward::run(const BatchLogitsSink& sink) {
  admit_items();
  if (batch_rows_ == 0) return std::move(status_);
  ctx_.reserve(c_, batch_rows_, ffn_rows(m_.weights_), m_.rope_pairs_);
  embed_rows();
  per_layer_inputs();  // gemma4 E models: every layer's input of its own
  const std::vector<int> cuts = phase_cuts();
  for (size_t p = 0; p + 1 < cuts.size(); ++p) {
    if (!enter_phase(cuts[p], cuts[p + 1])) continue;
    for (int l = cuts[p]; l < cuts[p + 1]; ++l) {
      attention_layer(l);  // x += attention(x), per the layer's attention kind
      ffn_layer(l);        // x += ffn(x), per the layer's FFN kind
      layer_output(l);     // gemma4: x += its per-layer input's part; x *= its scale
      check_finite(ctx_.x_.data(), int64_t(n_rows_) * c_.n_embd, l, "output");
    }
    leave_phase(cuts[p + 1]);
  }
  finish_items();
  emit_logits(sink);  // final norm and logits of the rows the items asked for
  ctx_.note_peak();
  return std::move(status_);
}

// Checks and page allocation, item by item: a failure leaves its sequence
// as it was and the item out of the batch. Small items first, so that the
// rows taking the exact kernels are contiguous.
void Forward::admit_items() {
  ctx_.live_.clear();
  ctx_.logits_slot_.assign(items_.size(), -1);
  std::vector<LiveItem> small, large;
  for (size_t i = 0; i < items_.size(); ++i) {
    LiveItem live;
    try {
      if (!admit(i, live)) continue;
    } catch (const kv::KvBudgetExceeded& e) {
      status_[i] = failed_status(ItemStatus::Code::kBudgetExceeded, e);
      continue;
    } catch (const kv::KvOutOfMemory& e) {
      status_[i] = failed_status(ItemStatus::Code::kOutOfMemory, e);
      continue;
    } catch (const Error& e) {
      status_[i] = failed_status(ItemStatus::Code::kInvalid, e);
      continue;
    }
    (live.exact ? small : large).push_back(live);
  }
  for (auto* group : {&small, &large}) {
    for (auto& live : *group) {
      live.row0 = live.home = batch_rows_;
      batch_rows_ += live.n_rows;
      ctx_.live_.push_back(live);
    }
    if (group == &small) batch_exact_ = batch_rows_;
  }
  n_rows_ = batch_rows_;
  n_exact_ = batch_exact_;
  all_ = ctx_.live_;
}

// Throws tkv::Error (or the pool's errors) for an item that cannot run;
// false for one with no tokens.
bool Forward::admit(size_t i, LiveItem& live) {
  const BatchItem& it = items_[i];
  const int n_layers = c_.n_layers, E = c_.n_embd;
  ChunkParts* parts = it.parts;
  const int lb = parts ? parts->done_ : 0;
  const int le = parts && parts->stop_ != 0 ? parts->stop_ : n_layers;
  if (it.sequence == nullptr) fail("batch item ", i, " has no sequence");
  for (size_t j = 0; j < i; ++j) {
    if (items_[j].sequence == it.sequence)
      fail("batch item ", i, " holds the same sequence as item ", j);
  }
  if (lb < 0 || le <= lb || le > n_layers)
    fail("batch item ", i, ": layers [", lb, ", ", le, ") are not a range of the model's ",
         n_layers);
  if (le < n_layers && it.logits != Logits::kNone)
    fail("batch item ", i, ": a part that stops before the last layer has no logits");
  m_.check_item(*it.sequence, it.tokens);
  if (it.tokens.empty()) return false;
  if (lb > 0 && parts->carry_.size() != it.tokens.size() * size_t(E))
    fail("batch item ", i, ": the carry of its chunk in progress holds ",
         parts->carry_.size() / size_t(E), " rows, not the ", it.tokens.size(),
         " tokens of this part");
  const int64_t pos0 = it.sequence->n_tokens();
  if (it.tokens.size() > size_t(std::numeric_limits<int>::max() / 2))
    fail("batch item ", i, " has too many tokens (", it.tokens.size(), ")");
  if (lb == 0) it.sequence->begin_chunk(int(it.tokens.size()));
  live.index = i;
  live.n_rows = int(it.tokens.size());
  live.pos0 = pos0;
  live.exact = int64_t(it.tokens.size()) <= kIntMatmulMaxTokens;
  live.layer_begin = lb;
  live.layer_end = le;
  return true;
}

// Embedding lookup (row `token` of token_embd, dequantized, times the
// model's embedding scale), or the rows an earlier part of the chunk left
// in its carry.
void Forward::embed_rows() {
  const size_t E = size_t(c_.n_embd);
  for (const auto& live : ctx_.live_) {
    const BatchItem& it = items_[live.index];
    float* x = ctx_.x_.data() + size_t(live.row0) * E;
    if (live.layer_begin > 0) {
      std::copy(it.parts->carry_.begin(), it.parts->carry_.end(), x);
      continue;
    }
    for (int t = 0; t < live.n_rows; ++t)
      weight_row(m_.weights_.token_embd, it.tokens[size_t(t)], x + size_t(t) * E);
    if (c_.embed_scale != 1.0f)  // gemma: embeddings times sqrt(n_embd)
      for (size_t i = 0; i < size_t(live.n_rows) * E; ++i) x[i] *= c_.embed_scale;
  }
}

// The RoPE angles of each row's position, once per layout of the rows: one
// table per distinct RoPE of the model (Model::ropes_), batch_rows_ rows each.
void Forward::rope_rows() {
  for (size_t r = 0; r < m_.ropes_.size(); ++r) {
    const size_t pairs = size_t(m_.ropes_[r].n_rot / 2);
    float* cos = ctx_.rope_cos_.data() + size_t(batch_rows_) * m_.rope_offsets_[r];
    float* sin = ctx_.rope_sin_.data() + size_t(batch_rows_) * m_.rope_offsets_[r];
    for (const auto& live : ctx_.live_)
      ops::rope_angles(m_.ropes_[r], live.pos0, live.n_rows, cos + size_t(live.row0) * pairs,
                       sin + size_t(live.row0) * pairs);
  }
}

// Phases: runs of layers over which the same items run. Without layer-split
// items there is one, over every row; else each phase packs its items' rows
// into x_ (exact rows first, as admitted) from x_all_, where every item's
// rows wait between the phases it is in.
std::vector<int> Forward::phase_cuts() const {
  std::vector<int> cuts = {0, c_.n_layers};
  for (const auto& live : all_) {
    cuts.push_back(live.layer_begin);
    cuts.push_back(live.layer_end);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  return cuts;
}

float* Forward::home(const LiveItem& live) const {
  return ctx_.x_all_.data() + size_t(live.home) * c_.n_embd;
}

// Makes x_ and live_ the rows of the items that run layers [l0, l1); false
// when there are none. The first call lays out the whole batch.
bool Forward::enter_phase(int l0, int l1) {
  const size_t E = size_t(c_.n_embd);
  if (l0 == 0) {
    split_ = phase_cuts().size() > 2;
    if (!split_) {
      rope_rows();
      return true;
    }
    ctx_.x_all_.assign(ctx_.x_.begin(), ctx_.x_.begin() + ptrdiff_t(size_t(batch_rows_) * E));
  }
  if (!split_) return true;
  ctx_.live_.clear();
  n_rows_ = n_exact_ = 0;
  for (LiveItem live : all_) {
    if (!status_[live.index].ok() || live.layer_begin > l0 || live.layer_end < l1) continue;
    live.row0 = n_rows_;
    std::copy(home(live), home(live) + size_t(live.n_rows) * E,
              ctx_.x_.data() + size_t(n_rows_) * E);
    n_rows_ += live.n_rows;
    ctx_.live_.push_back(live);
    if (live.exact) n_exact_ = n_rows_;
  }
  if (n_rows_ == 0) return false;
  rope_rows();
  return true;
}

// The last phase's rows stay in x_ for emit_logits (its live_ holds every
// item through the last layer, kept rows only); an earlier phase's go home.
void Forward::leave_phase(int l1) {
  if (!split_ || l1 >= c_.n_layers) return;
  const size_t E = size_t(c_.n_embd);
  for (const auto& live : ctx_.live_)
    std::copy(ctx_.x_.data() + size_t(live.row0) * E,
              ctx_.x_.data() + size_t(live.row0 + live.n_rows) * E, home(live));
}

// Items through the last layer end their chunk (and give logits); a part
// that stops earlier keeps its rows in its carry for the next one.
void Forward::finish_items() {
  for (const auto& live : all_) {
    ChunkParts* parts = items_[live.index].parts;
    if (parts == nullptr) continue;
    if (!status_[live.index].ok() || live.layer_end == c_.n_layers) {
      parts->reset();  // the chunk is done, or lost with its sequence
      continue;
    }
    parts->carry_.assign(home(live), home(live) + size_t(live.n_rows) * c_.n_embd);
    parts->done_ = live.layer_end;
  }
  for (const auto& live : ctx_.live_) items_[live.index].sequence->end_chunk();
}

void Forward::check_finite(const float* values, int64_t n, int layer, const char* what) const {
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
  fail(m_.file_.path(), ": the model file looks corrupt: NaN or Inf in layer ", layer, " ", what,
       " (broken weights; re-download or re-convert the file)");
}

}  // namespace tkv::model
