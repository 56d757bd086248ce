// A loaded llama-family model and its forward pass.
//
// The model is immutable after load(): weights are used in place from the
// GGUF file's bytes in memory (mapped, or read into huge pages:
// WeightMemory), every per-sequence state lives in the caller's kv::KvCache
// (the only place K and V are kept) and every per-call buffer in the
// caller's ExecutionContext (model/context.h). eval_batch() runs a batch
// of items -- (sequence, tokens) pairs: decode tokens of many sequences and
// prefill chunks of others, mixed -- through the network together:
//
//   rows = the tokens of every item, one row each       n_rows x n_embd
//   x = token_embd[rows]
//   for each layer, with its own geometry (ModelConfig::layers, layer_spec.h):
//     attention, per the layer's kind (today full attention):
//       h = rmsnorm(x) ; q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv)   all rows at once
//       (qwen3: rmsnorm of each q and k head) ; rope(q), rope(k) at each row's position
//       for each item: seq.write(layer, k, v) ; a = seq.attend(layer, q)  over its own pages
//       (last layer: from here on only the rows whose logits are wanted)
//       x += a Wo
//     FFN, per the layer's kind (today dense SwiGLU):
//       h = rmsnorm(x) ; x += (silu(h Wgate) * (h Wup)) Wdown            all rows at once
//   logits = rmsnorm(x) Woutput   (only for the rows the items asked for)
//
// (model/forward.h: the code follows this outline, one function per kind.)
// So B decoding sequences are one B-row product per weight matrix: the
// weights are streamed once per step, not once per sequence.
//
// Kernels and batch invariance. A sequence's logits are bit-identical
// whether its item runs alone or in any batch, with any other items, at any
// place in the list: which kernel a row takes depends only on its own item.
//  - Rows of a "small" item (at most tkv::kIntMatmulMaxTokens = 16 tokens:
//    decode, short chunks) take the matvec-identical path: for quantized
//    weights one integer-dot matmul over all such rows of the batch (its
//    token i is bit-identical to matvec(x_i), tensor/matmul.h); for
//    F32/F16/BF16 weights tkv::matvec_batch, a kernel with matvec's exact
//    per-row accumulation order (the float GEMM's order differs from
//    matvec's in the last bits, so it would make a decode step depend on
//    the batch). Either way the weights are streamed once for all rows.
//  - Rows of a larger item (prefill chunks) take tkv::prefill_kernel, kAuto's
//    choice for more than 16 tokens: the f32 GEMM, or the integer-dot token
//    tiles where they beat it (tkv::integer_matmul_active: AVX2 for some
//    K-quants), chosen by the weight type and SIMD target, never by the row
//    count (also for the one row the last layer keeps of such an item);
//    either kernel's per-row result does not depend on how many rows it is
//    given.
//  - The logits of an item's last token (Logits::kLast) always take the
//    matvec-identical path; every-token logits (Logits::kAll) of a large item
//    take the GEMM.
//  - Attention runs per item on its own sequence; its splits depend on that
//    sequence's length and the thread count only. RMSNorm, RoPE, SiLU and the
//    residual adds are per row.
// What is NOT invariant: the chunking of a prompt. Prefilling 1000 tokens in
// chunks of 512 or of 64 gives logits that differ in the last bits (an
// item's size decides GEMM vs matvec kernels, and attention sums a chunk's
// queries over its key tiles in an order that depends on where the chunk
// starts), and the thread count of the pool changes attention's split-K.
// A scheduler that wants reproducible outputs keeps its chunk size and
// thread count fixed; it never has to care what else is in the batch.
//
// Every layer's output (the residual stream x) and its K/V rows are checked
// for NaN/Inf, n_rows x n_embd values per layer, next to the layer's matrix
// work: a non-finite activation means the weights are broken, and the error
// names the layer instead of letting the NaN reach the logits or the codecs.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/mapped_file.h"
#include "common/thread_pool.h"
#include "gguf/gguf.h"
#include "kv/kv_cache.h"
#include "model/chunk_parts.h"
#include "model/config.h"
#include "model/context.h"
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

// What an item of a batch wants back.
enum class Logits {
  kNone,  // nothing (a prefill chunk that is not the prompt's last)
  kLast,  // the logits after the item's last token (decode, a prompt's last chunk)
  kAll,   // the logits after every token of the item (perplexity, KL)
};

// One item of a batch: `tokens` are appended to `sequence` (positions
// sequence->n_tokens() onwards). An item is one step of one sequence: a
// decode token, or one prefill chunk. A scheduler gives a long prompt to
// eval_batch one chunk per call (e.g. 512 tokens, or fewer so that the
// decoding items of the same batch are not stalled); the rows of all items
// of one call are held at once, so the chunk size bounds the context's
// memory. A sequence appears at most once per batch.
//
// An item may run only some layers of its chunk (`parts`, model/
// chunk_parts.h: a chunk spread over several calls); without it the chunk
// runs whole.
struct BatchItem {
  kv::KvCache* sequence = nullptr;
  std::span<const int32_t> tokens;
  Logits logits = Logits::kLast;
  ChunkParts* parts = nullptr;
};

// The outcome of one item of a batch. A failed item changed nothing in its
// sequence, except kSpillError, whose sequence was cleared; either way the
// other items of the batch went on.
struct ItemStatus {
  enum class Code {
    kOk,
    kInvalid,         // a token outside the vocabulary, another model's cache shape,
                      // a sequence past its max_tokens, no sequence, a sequence twice,
                      // a bad layer range (or its carry)
    kBudgetExceeded,  // the pool's byte budget cannot hold the item's pages
    kOutOfMemory,     // the system could not provide memory for its pages
    kSpillError,      // part-way through the step, the pool's disk tier failed it: a
                      // page could not be written or read back (disk full, I/O error,
                      // checksum mismatch), or the pages one layer's attention needs
                      // at once did not fit; the chunk is lost and the sequence was
                      // cleared (empty, usable: the caller feeds it again)
  };
  Code code = Code::kOk;
  std::string message;       // the error's one-line message, empty when ok
  std::exception_ptr error;  // the exception itself (for callers that rethrow it)
  bool ok() const { return code == Code::kOk; }
};

// Receives the logits (n_vocab values) that item `item` of the batch
// produced after `position`; called for every row an item asked for (an
// item's rows in order, items in no particular order), the span only valid
// during the call.
using BatchLogitsSink =
    std::function<void(size_t item, int64_t position, std::span<const float> logits)>;

// How load() holds the file's bytes (common/mapped_file.h: FileMemory).
enum class WeightMemory {
  // kCopy where the kernel gives transparent huge pages, the file is at
  // least 64 MiB and takes at most 3/4 of the memory available now; kMap
  // otherwise (a copy without huge pages gains nothing; a small file gains
  // little and its last huge page would be mostly padding; one that does not
  // fit would push the rest of the system out, where mapped pages are simply
  // read again).
  kAuto,
  kMap,   // --mmap
  kCopy,  // --no-mmap
};
// "auto", "map", "copy"; and back (nullopt for another name).
const char* weight_memory_name(WeightMemory memory);
std::optional<WeightMemory> parse_weight_memory(std::string_view name);
// kAuto's decision, given the facts (thp: transparent_huge_pages_available();
// available: available_memory_bytes(), 0 when unknown).
FileMemory choose_file_memory(WeightMemory want, uint64_t file_bytes, bool thp, uint64_t available);

class Model {
 public:
  // Maps or reads (WeightMemory) and validates the file; throws tkv::Error
  // naming the file and the offending key or tensor.
  static std::unique_ptr<Model> load(const std::string& path,
                                     WeightMemory memory = WeightMemory::kAuto);
  ~Model();

  const ModelConfig& config() const { return config_; }
  const gguf::GgufFile& gguf() const { return file_; }  // for the tokenizer, inspect
  const ModelWeights& weights() const { return weights_; }
  // Bytes of the weight tensors the forward pass reads (what decode streams
  // per token), and of the whole file.
  uint64_t weight_bytes() const { return weights_.bytes; }
  uint64_t file_bytes() const { return file_.file_size(); }
  // How the file's bytes are held: mapped, or copied into huge pages.
  FileMemory file_memory() const { return file_.mapping()->memory(); }
  // How many weight matrices are held as row blocks (tensor/matmul.h): in a
  // copy (kCopy) where row blocks are preferred (row_blocks_pay_off:
  // tensor/kernel_config.h), every F16 matrix of whole blocks, reordered once at
  // load; none when mapped. Their decode sums are the f32 GEMM's order, so
  // a copied F16 model's logits differ from the mapped file's in the last
  // bits.
  int row_block_matrices() const;
  // For logs: "mapped", "read into 2 MiB pages", or that plus ", F16
  // matrices as row blocks".
  std::string describe_weights() const;
  // Maps every page of the matrices the forward pass reads (common/
  // mapped_file.h: fault_in), so that the first prompt does not pay the page
  // faults. A long-running server calls it before it listens (llama-server
  // warms up with a forward pass for the same reason); the token embedding
  // table, of which a prompt reads a few rows, is left alone unless it is the
  // output matrix too. `turbokv chat` runs it on a thread while the user
  // types: with `stop` set it returns within one 16 MiB piece.
  void fault_in_weights(const std::atomic<bool>* stop = nullptr) const;
  // 32 hex digits identifying this model's metadata and tensor table (not the
  // tensor bytes, which would take a full read of the file): session files
  // store it so that a cache is never restored into another model.
  const std::string& fingerprint() const { return fingerprint_; }

  // The KV cache geometry for this model with room for `ctx` tokens
  // (ctx <= 0: the trained context length).
  kv::KvShape kv_shape(int ctx = 0) const;

  // Runs every item of `items` through the network together (see the top of
  // this file), with `ctx` holding every buffer and `pool` running the
  // products and attention. Returns one status per item, in order: an item
  // that fails its checks or its page allocation (begin_chunk) is left out
  // of the batch with its error, its sequence unchanged, and the others run;
  // an item whose write or attention fails in a later layer (kSpillError) is
  // dropped from the layers after it, its sequence cleared, and the others
  // run on with the same results as without it.
  // Delivers the logits each item asked for to `sink` (may be empty) and
  // keeps each kLast item's in ctx.logits(item). An item with no tokens is
  // ok and does nothing. Throws tkv::Error only for a model whose
  // activations turn non-finite (broken weights), after which the batch's
  // sequences must be cleared.
  //
  // Threads: any number of threads may call eval_batch on one Model at the
  // same time, each with its own ExecutionContext and ThreadPool, on
  // different sequences (they may share a kv::PagePool).
  std::vector<ItemStatus> eval_batch(ExecutionContext& ctx, std::span<const BatchItem> items,
                                     ThreadPool& pool, const BatchLogitsSink& sink = {}) const;

  // Appends `tokens` to the sequence in `cache` (positions cache.n_tokens()
  // onwards) in chunks of opts.ubatch (one single-item eval_batch each) and
  // delivers logits to `sink` as EvalOptions says. Throws tkv::Error (before
  // touching the cache) for a token id outside the vocabulary, a cache of
  // another shape, or a sequence that would outgrow the cache's max_tokens,
  // and kv::KvBudgetExceeded when a chunk's pages do not fit (the chunks
  // before it stay in the cache); with the pool's disk tier, a failure
  // part-way through a chunk (kv::KvSpillError, ItemStatus::kSpillError)
  // is rethrown after the sequence was cleared. Uses a context inside the model:
  // concurrent calls are serialized (callers that run in parallel use
  // eval_batch with their own contexts).
  void eval(kv::KvCache& cache, std::span<const int32_t> tokens, ThreadPool& pool,
            const LogitsSink& sink, const EvalOptions& opts = {}) const;

  // Convenience: eval() and return the logits of the last token.
  std::vector<float> eval_last(kv::KvCache& cache, std::span<const int32_t> tokens,
                               ThreadPool& pool, int ubatch = 512) const;

  // Bytes of scratch of eval()'s internal context: its activations (grown to
  // fit the largest ubatch used so far, then kept) and the calling thread's
  // product scratch (tkv::activation_scratch_bytes: quantized activations,
  // the prefill GEMMs' packed operands). A caller's own ExecutionContext
  // reports its bytes itself.
  uint64_t scratch_bytes() const;

 private:
  Model() = default;
  friend class Forward;              // one eval_batch (model/forward.h)
  void reorder_weights();            // load(): F16 matrices of a copy into row blocks
  void make_ropes();                 // load(): ropes_ and the layers' indexes into it
  void index_memory();               // load(): cache_index_, last_reader_
  kv::KvShape layer_shapes() const;  // load(): what kv_shape_ holds
  // Throws tkv::Error unless `tokens` may be appended to `cache`.
  void check_item(const kv::KvCache& cache, std::span<const int32_t> tokens) const;
  gguf::GgufFile file_;
  ModelConfig config_;
  ModelWeights weights_;
  // The distinct RoPEs of the layers; layer l uses ropes_[layer_rope_[l]],
  // whose cos/sin tables start rope_offsets_[r] pairs per row into the
  // context's (rope_pairs_ pairs per row in all).
  std::vector<ops::RopeFrequencies> ropes_;
  std::vector<int> layer_rope_;
  std::vector<size_t> rope_offsets_;
  int rope_pairs_ = 0;
  // Layer l's index in the sequence's memory: among the attention layers
  // with K/V of their own (kv::KvCache layers; a KV-shared layer reads its
  // source's), or among the recurrent ones (KvCache::state).
  std::vector<int> cache_index_;
  // Per KV-cache layer: the last model layer whose attention reads it in a
  // chunk (itself, or the last KV-shared layer reading it); the reads
  // before that one leave the cache layer open (KvCache::attend).
  std::vector<int> last_reader_;
  // kv_shape()'s layers (its max_tokens is the trained context), made at load.
  kv::KvShape kv_shape_;
  std::string fingerprint_;

  mutable std::mutex mu_;  // guards context_ (one eval() at a time)
  mutable ExecutionContext context_;
};

// 32 hex digits: a hash of every metadata key and value and of the tensor
// table (names, types, shapes, offsets).
std::string compute_fingerprint(const gguf::GgufFile& file);

}  // namespace tkv::model
