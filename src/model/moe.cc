#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/vec_math.h"
#include "model/forward.h"
#include "model/ops.h"

namespace tkv::model {

namespace {

uint64_t bytes_of(const std::vector<WeightMatrix>& experts) {
  uint64_t b = 0;
  for (const WeightMatrix& m : experts) b += m.total_bytes();
  return b;
}

// The k largest of `score` (idx.size() values): indexes, largest first,
// ties to the lower index. idx is the caller's scratch.
void top_k(const float* score, std::vector<int32_t>& idx, int k, int32_t* out) {
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return score[a] > score[b] || (score[a] == score[b] && a < b);
  });
  std::copy(idx.begin(), idx.begin() + k, out);
}

// Adds values [r0, r0 + width) of bias row `e` (of `full` values) to each
// of `rows` rows of `width`.
void add_expert_bias(const std::vector<float>& bias, int e, float* y, int rows, int64_t width,
                     int64_t r0, int64_t full) {
  if (bias.empty()) return;
  ops::add_bias_rows(y, bias.data() + size_t(e) * size_t(full) + size_t(r0), rows, width);
}

// One of an expert's products over `rows` rows, of which the first n_exact
// take the exact kernels. Super-block experts (the K-quants, iq4_xs) take
// the integer kernels for every row where this CPU has them: a prefill
// chunk routes a few dozen rows to an expert, too few for the f32 GEMM to
// repay dequantizing its matrix, which costs most for these types (the
// token tiles read it as it is). The 32-value types' GEMM stays ahead even
// at a few dozen rows.
void expert_project(const WeightMatrix& m, const float* in, int rows, int n_exact, float* out,
                    ThreadPool& pool) {
  const bool tiles = integer_path_active(m.type) && traits(m.type).block_size == 256;
  project(m, in, tiles ? rows : n_exact, rows, out, pool);
}

// Hidden values [f0, f1) of expert e for `rows` gathered rows `in`:
// buf.gate = act(gate + bias, up + bias), rows x (f1 - f0) (buf.up is
// scratch). The activation is elementwise, so a piece's values are the
// whole row's wherever f0 sits at a multiple of every vector width.
void expert_hidden(const MoeSpec& spec, const MoeWeights& w, int e, const float* in, int rows,
                   int n_exact, int64_t f0, int64_t f1, ExpertRows& buf, ThreadPool& pool) {
  const int64_t width = f1 - f0;
  expert_project(row_slice(w.gate[size_t(e)], f0, f1), in, rows, n_exact, buf.gate.data(), pool);
  expert_project(row_slice(w.up[size_t(e)], f0, f1), in, rows, n_exact, buf.up.data(), pool);
  add_expert_bias(w.gate_bias, e, buf.gate.data(), rows, width, f0, spec.n_ff);
  add_expert_bias(w.up_bias, e, buf.up.data(), rows, width, f0, spec.n_ff);
  ops::gated_activation_rows(spec.activation, buf.gate.data(), buf.up.data(), rows, int(width),
                             pool);
}

// Output values [r0, r1) of expert e from its `rows` hidden rows (n_ff
// wide): down, times the expert's scale, plus its bias, into out
// (rows x (r1 - r0)).
void expert_output(const MoeWeights& w, int e, const float* hidden, int rows, int n_exact,
                   int64_t r0, int64_t r1, float* out, ThreadPool& pool) {
  const WeightMatrix& down = w.down[size_t(e)];
  const int64_t width = r1 - r0;
  expert_project(row_slice(down, r0, r1), hidden, rows, n_exact, out, pool);
  if (!w.down_scale.empty()) {
    const float sc = w.down_scale[size_t(e)];
    for (size_t i = 0; i < size_t(rows) * size_t(width); ++i) out[i] *= sc;
  }
  add_expert_bias(w.down_bias, e, out, rows, width, r0, down.rows);
}

// One pass of expert e over `rows` gathered rows of s.in, of which the
// first n_exact take the exact kernels: s.out = down(act(gate, up)).
void expert_product(const MoeSpec& spec, const MoeWeights& w, int e, int rows, int n_exact,
                    ExpertRows& s, ThreadPool& pool) {
  expert_hidden(spec, w, e, s.in.data(), rows, n_exact, 0, spec.n_ff, s, pool);
  expert_output(w, e, s.gate.data(), rows, n_exact, 0, w.down[size_t(e)].rows, s.out.data(), pool);
}

// The shared expert over every row, added to y: a SwiGLU FFN, times
// sigmoid(w_shared_router . h) per row when the spec gates it (`gates`:
// n_rows values of scratch).
void shared_expert(const MoeSpec& spec, const MoeWeights& w, const float* h, int n_exact,
                   int n_rows, int max_rows, float* y, ExpertRows& s, float* gates,
                   ThreadPool& pool) {
  const int64_t E = w.shared_down.rows, F = spec.n_ff_shared;
  if (spec.shared_gate) project(w.shared_router, h, n_exact, n_rows, gates, pool);
  for (int r0 = 0; r0 < n_rows;) {
    const int end = r0 < n_exact ? n_exact : n_rows;
    const int rows = std::min(max_rows, end - r0);
    const bool exact = r0 < n_exact;
    const float* in = h + size_t(r0) * size_t(E);
    product(w.shared_gate, in, rows, s.gate.data(), exact, pool);
    product(w.shared_up, in, rows, s.up.data(), exact, pool);
    ops::gated_activation_rows(GatedActivation::SwiGlu, s.gate.data(), s.up.data(), rows, int(F),
                               pool);
    product(w.shared_down, s.gate.data(), rows, s.out.data(), exact, pool);
    for (int r = 0; r < rows; ++r) {
      float* out = s.out.data() + size_t(r) * size_t(E);
      if (spec.shared_gate) {
        const float gate = 1.0f / (1.0f + std::exp(-gates[r0 + r]));
        for (int64_t i = 0; i < E; ++i) out[i] *= gate;
      }
      ops::add(y + size_t(r0 + r) * size_t(E), out, E);
    }
    r0 += rows;
  }
}

}  // namespace

uint64_t MoeWeights::expert_bytes() const {
  return bytes_of(gate) + bytes_of(up) + bytes_of(down);
}

void route(const MoeSpec& spec, const float* logits, int rows, int32_t* experts, float* weights,
           RouteScratch& scratch) {
  const int n = spec.n_experts, k = spec.n_used;
  std::vector<float>& p = scratch.p;
  std::vector<int32_t>& idx = scratch.idx;
  p.resize(static_cast<size_t>(n));
  idx.resize(static_cast<size_t>(n));
  for (int r = 0; r < rows; ++r) {
    int32_t* chosen = experts + size_t(r) * size_t(k);
    float* wt = weights + size_t(r) * size_t(k);
    std::copy(logits + size_t(r) * size_t(n), logits + size_t(r + 1) * size_t(n), p.begin());
    if (spec.gating == MoeGating::Softmax) softmax(p.data(), n);
    top_k(p.data(), idx, k, chosen);
    for (int j = 0; j < k; ++j) wt[j] = p[size_t(chosen[j])];
    if (spec.gating == MoeGating::SoftmaxChosen) softmax(wt, k);
    if (spec.normalize) {
      float sum = 0.0f;
      for (int j = 0; j < k; ++j) sum += wt[j];
      sum = std::max(sum, 6.103515625e-5f);  // ggml clamps to the smallest f16 normal
      for (int j = 0; j < k; ++j) wt[j] /= sum;
    }
    if (spec.weights_scale != 0.0f && spec.weights_scale != 1.0f)
      for (int j = 0; j < k; ++j) wt[j] *= spec.weights_scale;
  }
}

void ExpertRows::reserve(size_t rows, size_t n_embd, size_t n_ff) {
  for (auto* v : {&in, &out})
    if (v->size() < rows * n_embd) v->resize(rows * n_embd);
  for (auto* v : {&gate, &up})
    if (v->size() < rows * n_ff) v->resize(rows * n_ff);
}

uint64_t MoeScratch::bytes() const {
  size_t floats = logits.size() + weights.size() + slot_out.size() + slot_hidden.size();
  const auto add = [&](const ExpertRows& r) {
    floats += r.in.size() + r.gate.size() + r.up.size() + r.out.size();
  };
  add(rows);
  for (const ExpertRows& r : thread_rows) add(r);
  return floats * sizeof(float) + route.p.size() * sizeof(float) +
         (chosen.size() + order.size() + expert_rows.size() + cursor.size() + with_rows.size() +
          by_rows.size() + route.idx.size()) *
             sizeof(int32_t) +
         pieces.size() * sizeof(ExpertPiece);
}

void MoeScratch::release() {
  const uint64_t read = expert_bytes_read;
  *this = MoeScratch();
  expert_bytes_read = read;
}

namespace {

uint64_t expert_bytes(const MoeWeights& w, int e) {
  return w.gate[size_t(e)].total_bytes() + w.up[size_t(e)].total_bytes() +
         w.down[size_t(e)].total_bytes();
}

// The (row, slot) pairs routed to expert e (grouped by the counting sort).
int rows_routed(const MoeScratch& s, int e) {
  return s.expert_rows[size_t(e) + 1] - s.expert_rows[size_t(e)];
}

// The rows h[pair / k] of `rows` (row, slot) pairs, one after another in
// dst (an expert's gathered input).
void gather_rows(const int32_t* pairs, int rows, int k, const float* h, size_t E, float* dst) {
  for (int r = 0; r < rows; ++r) std::copy_n(h + size_t(pairs[r] / k) * E, E, dst + size_t(r) * E);
}

// y[row] += weight x the expert's output row, for the `rows` (row, slot)
// pairs `pairs` (k slots a row) whose outputs are `out`, one after another.
void add_weighted(const MoeScratch& s, const int32_t* pairs, int rows, int k, const float* out,
                  size_t E, float* y) {
  for (int r = 0; r < rows; ++r) {
    const float wt = s.weights[size_t(pairs[r])];
    float* dst = y + size_t(pairs[r] / k) * E;
    const float* src = out + size_t(r) * E;
    for (size_t i = 0; i < E; ++i) dst[i] += wt * src[i];
  }
}

// Each chosen expert's (row, slot) outputs (s.slot_out) added to y in
// ascending expert order, and the experts' bytes counted.
void add_expert_outputs(const MoeWeights& w, const std::vector<int32_t>& chosen, int k, float* y,
                        MoeScratch& s) {
  const size_t E = size_t(w.router.cols);
  for (const int e : chosen) {
    const int32_t at = s.expert_rows[size_t(e)];
    add_weighted(s, s.order.data() + at, rows_routed(s, e), k, s.slot_out.data() + size_t(at) * E,
                 E, y);
    s.expert_bytes_read += expert_bytes(w, e);
  }
}

// Decode (every row on the exact kernels, a few of them): one task per
// chosen expert, its three products inline on one thread, each (row,
// slot)'s output kept, then the sums in ascending expert order. One
// parallel region instead of three per expert; the kernels' per-row bits
// do not depend on the thread count, so the results are the row-parallel
// path's, bit for bit.
void experts_in_parallel(const MoeSpec& spec, const MoeWeights& w, const float* h,
                         const std::vector<int32_t>& chosen, float* y, MoeScratch& s,
                         ThreadPool& pool) {
  const int k = spec.n_used;
  const size_t E = size_t(w.router.cols);
  // The experts with most rows first: a hot expert starts early, not last
  // behind the others (the sums keep ascending expert order).
  std::vector<int32_t>& by_rows = s.by_rows;
  by_rows.assign(chosen.begin(), chosen.end());
  std::sort(by_rows.begin(), by_rows.end(), [&](int32_t a, int32_t b) {
    return rows_routed(s, a) > rows_routed(s, b) ||
           (rows_routed(s, a) == rows_routed(s, b) && a < b);
  });  // (std::stable_sort would take a buffer from the heap every step)
  pool.run(int64_t(by_rows.size()), [&](int64_t task, int thread) {
    const int e = by_rows[size_t(task)];
    const int rows = rows_routed(s, e);
    ExpertRows& buf = s.thread_rows[size_t(thread)];
    gather_rows(s.order.data() + s.expert_rows[size_t(e)], rows, k, h, E, buf.in.data());
    ThreadPool inline_pool(1);
    expert_product(spec, w, e, rows, rows, buf, inline_pool);
    std::copy_n(buf.out.data(), size_t(rows) * E,
                s.slot_out.data() + size_t(s.expert_rows[size_t(e)]) * E);
  });
  add_expert_outputs(w, chosen, k, y, s);
}

// Rows of an expert's matrix one task of experts_split takes: a multiple
// of kSliceRows (the pieces get the whole product's bits) and of 64, so
// that the activation's vectors (up to 64 floats) start where they do in
// a whole row.
constexpr int64_t kPieceAlign = 64;
static_assert(kPieceAlign % kSliceRows == 0);

// Each chosen expert's `rows` output rows cut into pieces of kPieceAlign
// multiples, about four tasks a thread in all.
void expert_pieces(const std::vector<int32_t>& chosen, int64_t rows, int threads,
                   std::vector<ExpertPiece>& pieces) {
  pieces.clear();
  const int64_t n = int64_t(chosen.size()), aligned = (rows + kPieceAlign - 1) / kPieceAlign;
  if (n == 0 || aligned == 0) return;
  const int64_t per_expert = std::clamp((4 * int64_t(threads) + n - 1) / n, int64_t(1), aligned);
  const int64_t step = (aligned + per_expert - 1) / per_expert * kPieceAlign;
  for (const int32_t e : chosen)
    for (int64_t r0 = 0; r0 < rows; r0 += step)
      pieces.push_back({e, int32_t(r0), int32_t(std::min(rows, r0 + step))});
}

// Decode where the chosen experts are too few to keep every thread busy
// one per task (one row of a top-2 model on 16 threads): two parallel
// regions, each expert's products cut by output rows (expert_pieces) --
// gate and up with the activation, then down -- so that every thread
// streams weights. Each piece's rows get the whole product's bits and the
// activation is elementwise, so the results are experts_in_parallel's.
void experts_split(const MoeSpec& spec, const MoeWeights& w, const float* h,
                   const std::vector<int32_t>& chosen, int n_rows, float* y, MoeScratch& s,
                   ThreadPool& pool) {
  const int k = spec.n_used;
  const size_t E = size_t(w.router.cols), F = size_t(spec.n_ff);
  const size_t slots = size_t(n_rows) * size_t(k);
  if (s.slot_hidden.size() < slots * F) s.slot_hidden.resize(slots * F);
  const auto at = [&](int e) { return size_t(s.expert_rows[size_t(e)]); };
  // Piece rows [r0, r1) of every row of expert e: computed into `tmp`
  // (rows x width), then copied to rows of `stride` floats at dst + r0.
  const auto scatter = [](const float* tmp, int rows, size_t width, float* dst, size_t stride) {
    for (int r = 0; r < rows; ++r)
      std::copy_n(tmp + size_t(r) * width, width, dst + size_t(r) * stride);
  };
  // fn(piece, its expert's rows, its width, the thread's buffers, an
  // inline pool) for every piece of `rows_each` rows, over the pool.
  const auto run_pieces = [&](int64_t rows_each, const auto& fn) {
    expert_pieces(chosen, rows_each, pool.size(), s.pieces);
    pool.run(int64_t(s.pieces.size()), [&](int64_t task, int thread) {
      const ExpertPiece& p = s.pieces[size_t(task)];
      ThreadPool inline_pool(1);
      fn(p, rows_routed(s, p.expert), int64_t(p.r1 - p.r0), s.thread_rows[size_t(thread)],
         inline_pool);
    });
  };
  run_pieces(spec.n_ff, [&](const ExpertPiece& p, int rows, int64_t width, ExpertRows& buf,
                            ThreadPool& inline_pool) {
    const int e = p.expert;
    // Each piece gathers its expert's rows itself: no serial copy first.
    gather_rows(s.order.data() + at(e), rows, k, h, E, buf.in.data());
    expert_hidden(spec, w, e, buf.in.data(), rows, rows, p.r0, p.r1, buf, inline_pool);
    scatter(buf.gate.data(), rows, size_t(width), s.slot_hidden.data() + at(e) * F + size_t(p.r0),
            F);
  });
  run_pieces(int64_t(E), [&](const ExpertPiece& p, int rows, int64_t width, ExpertRows& buf,
                             ThreadPool& inline_pool) {
    const int e = p.expert;
    expert_output(w, e, s.slot_hidden.data() + at(e) * F, rows, rows, p.r0, p.r1, buf.out.data(),
                  inline_pool);
    scatter(buf.out.data(), rows, size_t(width), s.slot_out.data() + at(e) * E + size_t(p.r0), E);
  });
  add_expert_outputs(w, chosen, k, y, s);
}

// The decode path's split: one expert per task where the chosen experts
// keep every thread busy -- several tasks a thread, or as many equal tasks
// as threads (one row: every expert has as many rows) -- else pieces.
void decode_experts(const MoeSpec& spec, const MoeWeights& w, const float* h, int n_rows, float* y,
                    MoeScratch& s, ThreadPool& pool) {
  const int n = spec.n_experts, k = spec.n_used;
  const size_t E = size_t(w.router.cols);
  std::vector<int32_t>& chosen = s.with_rows;  // experts with rows, ascending
  chosen.clear();
  for (int e = 0; e < n; ++e)
    if (rows_routed(s, e) > 0) chosen.push_back(e);
  if (s.thread_rows.size() < size_t(pool.size())) s.thread_rows.resize(size_t(pool.size()));
  for (ExpertRows& r : s.thread_rows) r.reserve(size_t(n_rows), E, size_t(spec.n_ff));
  if (s.slot_out.size() < size_t(n_rows) * size_t(k) * E)
    s.slot_out.resize(size_t(n_rows) * size_t(k) * E);
  if (experts_one_per_task(int(chosen.size()), n_rows == 1, pool.size()))
    return experts_in_parallel(spec, w, h, chosen, y, s, pool);
  experts_split(spec, w, h, chosen, n_rows, y, s, pool);
}

}  // namespace

bool experts_one_per_task(int n_chosen, bool equal_tasks, int threads) {
  return n_chosen >= 4 * threads || (equal_tasks && n_chosen % threads == 0);
}

// Up to this many rows, all exact (the decode tokens of a batch), the
// experts run as decode_experts splits them.
constexpr int kDecodeRows = 16;

void moe_ffn(const MoeSpec& spec, const MoeWeights& w, const float* h, const float* router_in,
             int n_exact, int n_rows, int max_rows, float* y, MoeScratch& s, ThreadPool& pool) {
  if (n_rows <= 0) return;
  const int n = spec.n_experts, k = spec.n_used;
  const size_t E = size_t(w.router.cols);
  const int cap = std::max(1, std::min(max_rows, n_rows));
  const auto grow = [](auto& v, size_t size) {
    if (v.size() < size) v.resize(size);
  };
  grow(s.logits, size_t(n_rows) * size_t(n));
  grow(s.chosen, size_t(n_rows) * size_t(k));
  grow(s.weights, size_t(n_rows) * size_t(k));
  grow(s.order, size_t(n_rows) * size_t(k));
  s.rows.reserve(size_t(cap), E, size_t(std::max(spec.n_ff, spec.n_ff_shared)));

  project(w.router, router_in ? router_in : h, n_exact, n_rows, s.logits.data(), pool);
  if (!w.router_bias.empty()) ops::add_bias_rows(s.logits.data(), w.router_bias.data(), n_rows, n);
  route(spec, s.logits.data(), n_rows, s.chosen.data(), s.weights.data(), s.route);

  // (row, slot) pairs grouped by expert, rows ascending within each (a
  // counting sort): the exact rows of an expert come before its GEMM rows.
  s.expert_rows.assign(size_t(n) + 1, 0);
  for (size_t i = 0; i < size_t(n_rows) * size_t(k); ++i) ++s.expert_rows[size_t(s.chosen[i]) + 1];
  std::partial_sum(s.expert_rows.begin(), s.expert_rows.end(), s.expert_rows.begin());
  s.cursor.assign(s.expert_rows.begin(), s.expert_rows.end() - 1);
  for (int32_t i = 0; i < n_rows * k; ++i)
    s.order[size_t(s.cursor[size_t(s.chosen[size_t(i)])]++)] = i;

  if (n_exact == n_rows && n_rows <= kDecodeRows && pool.size() > 1) {
    decode_experts(spec, w, h, n_rows, y, s, pool);
  } else {
    for (int e = 0; e < n; ++e) {
      const int32_t* pairs = s.order.data() + s.expert_rows[size_t(e)];
      const int count = rows_routed(s, e);
      for (int c0 = 0; c0 < count;) {
        // A call holds exact rows only or GEMM rows only (as the dense FFN).
        const bool exact = pairs[c0] / k < n_exact;
        int rows = 0;
        while (c0 + rows < count && rows < cap && (pairs[c0 + rows] / k < n_exact) == exact) ++rows;
        gather_rows(pairs + c0, rows, k, h, E, s.rows.in.data());
        expert_product(spec, w, e, rows, exact ? rows : 0, s.rows, pool);
        s.expert_bytes_read += expert_bytes(w, e);
        add_weighted(s, pairs + c0, rows, k, s.rows.out.data(), E, y);
        c0 += rows;
      }
    }
  }
  // The router's logits are spent: their buffer holds the shared gates.
  if (spec.n_ff_shared > 0)
    shared_expert(spec, w, h, n_exact, n_rows, cap, y, s.rows, s.logits.data(), pool);
}

}  // namespace tkv::model
