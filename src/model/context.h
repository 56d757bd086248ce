// The working memory of one forward pass, owned by the caller.
//
// A Model is const after load and holds no per-call state: everything one
// Model::eval_batch() needs besides the model and the sequences' KV stores
// lives here -- the activations of every row of the batch (residual stream,
// q/k/v, attention output, FFN hidden rows, RoPE tables), the logits
// buffers and the attention scratch (kv::AttentionScratch). Several threads
// may run eval_batch on one Model at the same time, each with its own
// ExecutionContext and its own ThreadPool.
//
// Buffers are sized on use for the number of rows of the largest batch seen
// so far, then kept (release() frees them). Not thread-safe: one context
// serves one eval_batch at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kv/attention_scratch.h"
#include "model/config.h"
#include "model/moe.h"

namespace tkv::model {

class Model;
class Forward;

class ExecutionContext {
 public:
  ExecutionContext() = default;
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;
  ExecutionContext(ExecutionContext&&) = default;

  // Bytes held now: activations and logits, the attention scratch, and the
  // products' scratch (quantized activations, the prefill GEMMs' packed
  // operands) of the thread that last ran eval_batch with this context
  // (tkv::activation_scratch_bytes(): it is per thread, so contexts used on
  // one thread share it).
  uint64_t bytes() const;
  // The most bytes() has been since construction or reset_peak(), including
  // the attention scratch's own peak within a call.
  uint64_t peak_bytes() const;
  // Activations and logits only (what Model::scratch_bytes() reports).
  uint64_t activation_bytes() const;
  void reset_peak();
  // Frees every buffer; the next eval_batch allocates again.
  void release();

  // Bytes of mixture-of-experts weights the calls with this context have
  // streamed since it was made (the experts their rows chose; model/moe.h).
  uint64_t expert_bytes_read() const { return moe_.expert_bytes_read; }

  // Logits (n_vocab values) of item `item`'s last token from the latest
  // eval_batch, for an item that asked for Logits::kLast and succeeded;
  // empty otherwise. Valid until the next eval_batch with this context.
  std::span<const float> logits(size_t item) const;

 private:
  friend class Model;
  friend class Forward;

  // Grows the row buffers to hold `rows` rows of the widest layer of
  // `config` (the FFN hidden rows to min(rows, ffn_rows)) and rope_pairs
  // cos/sin values per row (every distinct RoPE of the model).
  void reserve(const ModelConfig& config, int rows, int ffn_rows, int rope_pairs);
  void note_peak();

  // One item of the current batch that passed its checks, with its rows
  // [row0, row0 + n_rows) of every activation buffer.
  struct LiveItem {
    size_t index = 0;  // in the caller's item list
    int row0 = 0;
    int n_rows = 0;
    int64_t pos0 = 0;
    bool exact = false;                  // small item: rows take the matvec-identical kernels
    int layer_begin = 0, layer_end = 0;  // the layers it runs in this call
    int home = 0;                        // its first row in x_all_
    int tok0 = 0;  // index in its item's tokens of its first row (keep_logit_rows moves it)
  };

  int capacity_ = 0;  // rows the buffers hold
  // Rows per FFN product call of this eval_batch; gate_ and up_ hold them.
  int ffn_rows_ = 0;
  std::vector<float> x_;  // residual stream, rows x n_embd
  // Widths are the widest layer's (ModelConfig::max_*).
  std::vector<float> xb_;         // normed input / block output, rows x max(n_embd, q, out)
  std::vector<float> q_;          // rows x q width
  std::vector<float> k_, v_;      // rows x K (V) width
  std::vector<float> att_;        // attention output, rows x out width
  std::vector<float> attn_gate_;  // output-gated layers: rows x out width
  // Recurrent layers: rows x conv channels (q, k, v; conv output in place),
  // rows x inner size (z), rows x value heads (beta; the decay).
  std::vector<float> conv_rows_, z_rows_, beta_rows_, gate_rows_;
  std::vector<float> gate_, up_;  // min(rows, FFN chunk) x n_ff
  // Experts beside a dense FFN (gemma4): rows x n_embd each, the experts'
  // input, the router's input and the experts' output.
  std::vector<float> moe_in_, router_in_, moe_out_;
  // Per-layer inputs (gemma4 E models): per row of the batch in admission
  // order (LiveItem::home + tok0), n_layers x width values; and one layer's
  // gate and input rows (2 x rows x width) while it runs.
  std::vector<float> per_layer_, pl_rows_;
  std::vector<float> logits_;       // a group of rows x n_vocab
  std::vector<float> last_logits_;  // one row per kLast item
  // Per distinct RoPE of the model (Model::ropes_), rows x its n_rot/2,
  // one table after the other.
  std::vector<float> rope_cos_, rope_sin_;
  // With layer-split items, every live item's residual rows while the
  // layers run on a subset of them (x_ holds that subset).
  std::vector<float> x_all_;
  kv::AttentionScratch attention_;
  MoeScratch moe_;  // mixture-of-experts layers' routing and expert rows
  // Use the sequences' own attention scratch instead of attention_ (the
  // single-sequence Model::eval keeps its memory figures as they were:
  // KvStats::scratch_bytes counts that scratch).
  bool sequence_scratch_ = false;

  std::vector<LiveItem> live_;
  std::vector<int> logits_slot_;  // per caller item: row in last_logits_, or -1
  int n_vocab_ = 0;
  uint64_t act_scratch_bytes_ = 0;  // tkv::activation_scratch_bytes() after the last call
  uint64_t peak_ = 0;
};

}  // namespace tkv::model
