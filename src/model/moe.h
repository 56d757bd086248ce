// The mixture-of-experts FFN (layer_spec.h: MoeSpec), as llama.cpp's
// build_moe_ffn computes it, for the rows of one forward pass.
//
//   1. router: logits = W_router h (+ bias) for every row;
//   2. route(): each row's n_used experts and their weights;
//   3. per expert, in ascending expert order, one product over all the rows
//      routed to it (prefill rows and the decode rows of every sequence in
//      the batch together), so that an expert's weights stream once per
//      step and experts nobody chose are never read;
//   4. each row's output is the sum of its experts' weighted outputs, added
//      in ascending expert order, plus the shared expert's.
//
// Batch invariance: a row's result depends only on that row. The rows
// below n_exact take the matvec-identical kernels, the others the prefill
// GEMM (model/forward.h: product), each of whose per-row results does not
// depend on the other rows in the call; and a row's sum runs over its own
// experts in a fixed order.
#pragma once

#include <cstdint>
#include <vector>

#include "common/thread_pool.h"
#include "model/layer_spec.h"
#include "tensor/matmul.h"

namespace tkv::model {

// The tensors of one MoE FFN. The expert tensors are GGUF's 3-D
// ffn_{gate,up,down}_exps ([cols, rows, n_experts] in ggml order), one
// WeightMatrix per expert pointing into the file; a merged ffn_gate_up_exps
// gives gate (its first n_ff rows) and up (the next n_ff) per expert.
struct MoeWeights {
  WeightMatrix router;                       // n_experts rows of n_embd
  std::vector<float> router_bias;            // n_experts, or empty
  std::vector<float> router_scale;           // n_embd: gemma4's router input scale, or empty
  std::vector<WeightMatrix> gate, up, down;  // one per expert
  std::vector<float> gate_bias, up_bias, down_bias;  // n_experts x width, or empty
  std::vector<float> down_scale;                     // one per expert, or empty
  WeightMatrix shared_gate, shared_up, shared_down;  // the shared expert (n_ff_shared > 0)
  WeightMatrix shared_router;                        // 1 row: its sigmoid gate (shared_gate)

  uint64_t expert_bytes() const;  // of all experts' matrices
};

// route()'s working memory: one row's scores and their ranking.
struct RouteScratch {
  std::vector<float> p;
  std::vector<int32_t> idx;
};

// Each of `rows` rows' chosen experts and weights (rows x spec.n_used each,
// in the order llama.cpp ranks them: largest first) from its router logits
// (rows x n_experts, bias already added).
void route(const MoeSpec& spec, const float* logits, int rows, int32_t* experts, float* weights,
           RouteScratch& scratch);

// One expert's pass over some rows: the gathered rows, the hidden rows and
// the output rows.
struct ExpertRows {
  std::vector<float> in, gate, up, out;
  void reserve(size_t rows, size_t n_embd, size_t n_ff);
};

// Rows [r0, r1) of one expert's matrices: a task of a decode step whose
// experts are cut by rows.
struct ExpertPiece {
  int32_t expert, r0, r1;
};

// Working memory of moe_ffn, grown on use and kept (a decode step
// allocates nothing once its shapes have been seen).
struct MoeScratch {
  std::vector<float> logits;         // rows x n_experts
  std::vector<int32_t> chosen;       // rows x n_used
  std::vector<float> weights;        // rows x n_used
  std::vector<int32_t> order;        // (row, slot) pairs grouped by expert
  std::vector<int32_t> expert_rows;  // rows per expert (counting sort)
  std::vector<int32_t> cursor;       // the counting sort's next slot per expert
  ExpertRows rows;                   // the expert in progress
  // Decode: one ExpertRows per thread, and each (row, slot)'s output row
  // (and, where the experts' products are cut by rows, its hidden row).
  std::vector<ExpertRows> thread_rows;
  std::vector<float> slot_out, slot_hidden;
  std::vector<int32_t> with_rows, by_rows;  // the chosen experts: ascending, most rows first
  std::vector<ExpertPiece> pieces;
  RouteScratch route;
  // Bytes of expert matrices streamed by moe_ffn since construction (each
  // expert a call ran, gate + up + down): what a batch really reads.
  uint64_t expert_bytes_read = 0;

  uint64_t bytes() const;
  void release();
};

// How a decode step (at most 16 rows, all exact) spreads its chosen
// experts over `threads`: true, one task per expert, each expert's three
// products inline on one thread (one parallel region), where that keeps
// every thread busy -- at least 4 experts a thread, or `equal_tasks` (one
// row: every expert has as many rows) in a multiple of the threads; false,
// every expert's products cut by output rows over all threads (two
// regions: gate and up, then down), so that one row of a top-2 model on
// 16 threads does not leave 14 idle. Both give the same bits.
bool experts_one_per_task(int n_chosen, bool equal_tasks, int threads);

// y (n_rows x n_embd, the residual stream) += the MoE FFN of the normed rows
// h (n_rows x n_embd), routed by the router's product with router_in (rows
// of its own, gemma4; nullptr: h); rows [0, n_exact) take the exact
// kernels. At most `max_rows` rows go through one product call (bounds the
// hidden scratch).
void moe_ffn(const MoeSpec& spec, const MoeWeights& w, const float* h, const float* router_in,
             int n_exact, int n_rows, int max_rows, float* y, MoeScratch& s, ThreadPool& pool);

}  // namespace tkv::model
