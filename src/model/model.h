// A loaded llama-family model and its forward pass.
//
// The model is immutable after load(): weights are used in place from the
// memory-mapped GGUF file, and every per-sequence state lives in the caller's
// kv::KvCache (the only place K and V are kept). eval() feeds tokens through
// the network in chunks of up to `ubatch` tokens:
//
//   for each chunk of T tokens at positions p .. p+T-1:
//     x = token_embd[tokens]                                    T x n_embd
//     for each layer:
//       h = rmsnorm(x) ; q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv)
//       (qwen3: rmsnorm of each q and k head) ; rope(q), rope(k)
//       cache.write(layer, k, v) ; a = cache.attend(layer, q)
//       x += a Wo
//       h = rmsnorm(x) ; x += (silu(h Wgate) * (h Wup)) Wdown
//     logits = rmsnorm(x) Woutput   (only for the rows the caller asked for)
//
// T = 1 (decode) uses matvec, larger chunks matmul (weights reused per token).
//
// Every layer's output (the residual stream x) and its K/V rows are checked
// for NaN/Inf, T x n_embd values per layer, next to the layer's matrix work
// of T x n_embd x (several n_embd): a non-finite activation means the
// weights are broken, and the error names the layer instead of letting the
// NaN reach the logits or the KV codecs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "gguf/gguf.h"
#include "kv/kv_cache.h"
#include "model/config.h"
#include "model/ops.h"
#include "model/weights.h"

namespace tkv::model {

// Receives the logits (n_vocab values) that predict the token after
// `position`; the span is only valid during the call.
using LogitsSink = std::function<void(int64_t position, std::span<const float> logits)>;

struct EvalOptions {
  int ubatch = 512;  // tokens per prefill chunk (>= 1)
  // false: logits of the last token of the call only; true: of every token
  // (perplexity, KL), delivered in order, a few rows at a time so that no
  // ubatch x n_vocab buffer is ever needed.
  bool all_logits = false;
  // Called after each chunk with the tokens of this call evaluated so far
  // and their total (prefill progress); may be empty.
  std::function<void(int64_t done, int64_t total)> on_chunk;
};

class Model {
 public:
  // Maps and validates the file; throws tkv::Error naming the file and the
  // offending key or tensor.
  static std::unique_ptr<Model> load(const std::string& path);
  ~Model();

  const ModelConfig& config() const { return config_; }
  const gguf::GgufFile& gguf() const { return file_; }  // for the tokenizer, inspect
  const ModelWeights& weights() const { return weights_; }
  // Bytes of the weight tensors the forward pass reads (what decode streams
  // per token), and of the whole file.
  uint64_t weight_bytes() const { return weights_.bytes; }
  uint64_t file_bytes() const { return file_.file_size(); }
  // 32 hex digits identifying this model's metadata and tensor table (not the
  // tensor bytes, which would take a full read of the file): session files
  // store it so that a cache is never restored into another model.
  const std::string& fingerprint() const { return fingerprint_; }

  // The KV cache geometry for this model with room for `ctx` tokens
  // (ctx <= 0: the trained context length).
  kv::KvShape kv_shape(int ctx = 0) const;

  // Appends `tokens` to the sequence in `cache` (positions cache.n_tokens()
  // onwards) and delivers logits to `sink` as EvalOptions says. Throws
  // tkv::Error (before touching the cache) for a token id outside the
  // vocabulary, a cache of another shape, or a sequence that would outgrow
  // the cache's max_tokens. Concurrent calls on one Model are serialized (they
  // share the scratch buffers; the thread pool is not reentrant either).
  void eval(kv::KvCache& cache, std::span<const int32_t> tokens, ThreadPool& pool,
            const LogitsSink& sink, const EvalOptions& opts = {}) const;

  // Convenience: eval() and return the logits of the last token.
  std::vector<float> eval_last(kv::KvCache& cache, std::span<const int32_t> tokens,
                               ThreadPool& pool, int ubatch = 512) const;

  // Bytes of scratch activations currently allocated (grows to fit the largest
  // ubatch used so far, then stays).
  uint64_t scratch_bytes() const;

 private:
  struct Scratch;
  Model() = default;
  void ensure_scratch(int ubatch) const;
  void forward_chunk(kv::KvCache& cache, const int32_t* tokens, int T, int64_t pos0,
                     ThreadPool& pool, const LogitsSink& sink, bool all_logits) const;
  void attention_block(kv::KvCache& cache, int layer, int T, ThreadPool& pool) const;
  // tkv::Error naming the layer when values[0, n) holds a NaN or an Inf.
  void check_finite(const float* values, int64_t n, int layer, const char* what) const;
  void ffn_block(int layer, int T, ThreadPool& pool) const;
  void emit_logits(int T, int64_t pos0, ThreadPool& pool, const LogitsSink& sink,
                   bool all_logits) const;

  gguf::GgufFile file_;
  ModelConfig config_;
  ModelWeights weights_;
  ops::RopeFrequencies rope_;
  std::string fingerprint_;

  mutable std::mutex mu_;  // guards scratch_ (one eval at a time)
  mutable std::unique_ptr<Scratch> scratch_;
};

// 32 hex digits: a hash of every metadata key and value and of the tensor
// table (names, types, shapes, offsets).
std::string compute_fingerprint(const gguf::GgufFile& file);

}  // namespace tkv::model
