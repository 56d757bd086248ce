// One Model::eval_batch call (internal to src/model): the batch's rows and
// the forward pass's steps, in the order they run.
//
//   forward.cc            run(): admit the items, embed their rows, the layer
//                         loop (in phases when items run parts of their layers),
//                         end the chunks, logits
//   forward_attention.cc  attention_layer(): one function per attention kind
//                         (full_attention; recurrent_layer in
//                         forward_recurrent.cc), the output projection, and
//                         keep_logit_rows for the last layer
//   forward_ffn.cc        ffn_layer(): one function per FFN kind (dense_ffn,
//                         moe_ffn_layer: model/moe.h, moe_plus_dense_ffn)
//   forward_layer.cc      per_layer_inputs(), layer_output(): gemma4's
//                         per-layer inputs and output scale
//   forward_logits.cc     emit_logits(): final norm and output projection
//
// A new layer kind (model/layer_spec.h) is a case in attention_layer() or
// ffn_layer() and one function beside the others; what it keeps per
// sequence goes in the sequence's kv::KvCache, what it needs per call in
// ExecutionContext.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "model/model.h"

namespace tkv::model {

// out = in W^T for `rows` rows: exact, the matvec-identical kernels; else
// the prefill GEMM (forward.cc says which and why).
void product(const WeightMatrix& w, const float* in, int rows, float* out, bool exact,
             ThreadPool& pool);
// The rows [0, n_exact) take the exact kernels, [n_exact, n_rows) the GEMM.
void project(const WeightMatrix& w, const float* in, int n_exact, int n_rows, float* out,
             ThreadPool& pool);

// The status of an item whose check, allocation or step threw `e`.
ItemStatus failed_status(ItemStatus::Code code, const std::exception& e);

class Forward {
 public:
  Forward(const Model& model, ExecutionContext& ctx, std::span<const BatchItem> items,
          ThreadPool& pool);
  std::vector<ItemStatus> run(const BatchLogitsSink& sink);

 private:
  using LiveItem = ExecutionContext::LiveItem;

  // forward.cc: the batch.
  void admit_items();  // checks and begin_chunk per item; lays out the rows
  bool admit(size_t i, LiveItem& live);
  void embed_rows();  // token embeddings, or the carry of an earlier part
  void rope_rows();   // cos/sin of every row's position, per distinct RoPE
  std::vector<int> phase_cuts() const;
  bool enter_phase(int l0, int l1);  // split batches: pack the phase's rows into x_
  void leave_phase(int l1);
  void finish_items();  // carries of parts that stop early; end_chunk
  float* home(const LiveItem& live) const;

  // forward_attention.cc: x += attention(x), per the layer's attention kind.
  void attention_layer(int l);
  void full_attention(int l);
  void qkv_rows(int l);  // normed x -> q, k, v with biases, QK norms and RoPE
  void kv_rows(int l);   // normed x -> k, v with biases and norms (before RoPE)
  void attend_items(int l, const float* q, const float* k, const float* v);
  // Runs `work` on each live item of a layer whose memory may be on the
  // pool's disk tier. An item whose memory fails to move (KvSpillError) or
  // to fit (KvBudgetExceeded, KvOutOfMemory) fails alone: its chunk is
  // abandoned, its rows of `out` (`width` floats each) zeroed (its rows stay
  // in the batch: their kernels do not depend on the others) and it leaves
  // the later layers.
  void each_item_with_memory(const std::function<void(const LiveItem&)>& work, float* out,
                             int width);
  void split_output_gate(int l);  // q rows [q | gate] per head -> q_, attn_gate_
  void gate_output(int l);        // att *= sigmoid(gate)
  // forward_recurrent.cc: Gated DeltaNet.
  void recurrent_layer(int l);
  void recurrent_item(int l, const LiveItem& live);
  void keep_logit_rows();
  void attention_output(int l);

  // forward_ffn.cc: x += ffn(x), per the layer's FFN kind.
  void ffn_layer(int l);
  void dense_ffn(int l);
  void dense_ffn_rows(int l);  // xb_ (normed rows) -> the dense FFN's output, in place
  void moe_ffn_layer(int l);
  void moe_plus_dense_ffn(int l);

  // forward_layer.cc: gemma4's per-layer inputs (made once per batch from
  // the tokens) and what each layer adds with its own, then its output scale.
  void per_layer_inputs();
  void layer_output(int l);

  // forward_logits.cc
  void emit_logits(const BatchLogitsSink& sink);

  // tkv::Error naming the layer when values[0, n) holds a NaN or an Inf.
  void check_finite(const float* values, int64_t n, int layer, const char* what) const;

  const Model& m_;
  const ModelConfig& c_;
  ExecutionContext& ctx_;
  std::span<const BatchItem> items_;
  ThreadPool& pool_;
  std::vector<ItemStatus> status_;
  std::vector<LiveItem> all_;     // every admitted item (live_ holds a phase's)
  int batch_rows_ = 0;            // rows of every admitted item
  int batch_exact_ = 0;           // of which take the exact kernels
  int n_rows_ = 0, n_exact_ = 0;  // rows in x_ now, of which exact (first)
  bool split_ = false;            // some item runs only part of the layers
};

}  // namespace tkv::model
