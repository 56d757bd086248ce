// turbokv's C++ API: embed the engine in a program.
//
//   turbokv::Engine engine("model.gguf", {.kv_cache_type = "k4v2"});
//   turbokv::Sequence seq = engine.new_sequence();
//   seq.eval(engine.tokenize("Once upon a time", /*add_bos=*/true));
//   seq.generate({.max_tokens = 32}, [](std::string_view text) {
//     std::cout << text;
//     return true;  // false cancels
//   });
//
// An Engine is one loaded model, one KV page pool with a byte budget that
// every sequence of the engine shares, and one thread pool. A Sequence is
// one token sequence whose compressed KV pages come from that pool; fork()
// shares them copy-on-write (a common prefix is stored once).
//
// Errors: every failure throws turbokv::Error with a one-line message;
// turbokv::BudgetExceeded when the pool's budget cannot hold what was asked
// (free or truncate sequences and retry). A failed call changes nothing
// unless its comment says otherwise.
//
// Threads: an Engine may be used from any thread. Calls that run the model
// (Sequence::eval, Sequence::generate) are serialized per engine: one runs at
// a time, using all the engine's threads. One Sequence must not be used from
// two threads at once; different sequences may. A generate callback must not
// call into the same engine. Every Sequence must be destroyed before its
// Engine.
//
// ABI: this header is the C++ face of libturbokv.so (SONAME
// libturbokv.so.TURBOKV_ABI_VERSION, see turbokv.h); classes hold one
// pointer each, so their layout does not change between releases of one ABI
// version.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "turbokv/turbokv.h"

namespace turbokv {

class TKV_API Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class TKV_API BudgetExceeded : public Error {
 public:
  using Error::Error;
};

// The system could not provide memory (the budget allowed it).
class TKV_API OutOfMemory : public Error {
 public:
  using Error::Error;
};

struct EngineOptions {
  int threads = 0;   // 0: one per physical core
  int context = 0;   // tokens per sequence; 0: the model's trained context
  int ubatch = 512;  // tokens per prefill chunk
  // KV codecs, as `turbokv run --kv`: "f16", "q8_0", "k4v2" (tq4 keys, tq2
  // values), ... with the default sinks and residual window of quantized codecs.
  std::string kv_cache_type = "f16";
  uint64_t kv_budget_bytes = 0;  // every sequence's pages together; 0: unlimited
};

// llama.cpp's defaults; temperature 0 is greedy.
struct SamplingParams {
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  uint64_t seed = 0;
};

enum class StopReason {
  kLength = TKV_STOP_LENGTH,           // max_tokens generated
  kEndOfText = TKV_STOP_END_OF_TEXT,   // an end-of-generation token (not shown, not fed)
  kStopString = TKV_STOP_STOP_STRING,  // a stop string (not shown)
  kContextFull = TKV_STOP_CONTEXT_FULL,
  kCancelled = TKV_STOP_CANCELLED,  // the callback returned false
};

struct GenerateParams {
  int64_t max_tokens = -1;  // < 0: until end of text or a full context
  bool stop_at_eog = true;
  std::vector<std::string> stops;
  SamplingParams sampling;
};

struct GenerateResult {
  StopReason reason = StopReason::kLength;
  int64_t n_generated = 0;
};

// Receives text as it becomes safe to show (whole UTF-8 characters, stop
// strings held back); returns false to cancel.
using TextCallback = std::function<bool(std::string_view text)>;

struct PoolStats {
  uint64_t bytes_in_use = 0;  // pages, sinks and residual rings of every sequence
  uint64_t budget = 0;        // 0: unlimited
  uint64_t shared_bytes = 0;  // of bytes_in_use: pages held by more than one sequence
};

class Sequence;
class Sampler;

// One item of Engine::eval_batch: tokens to append to a sequence.
struct BatchEntry {
  Sequence* sequence = nullptr;
  std::span<const int32_t> tokens;
};

struct BatchOutcome {
  bool ok = true;
  bool budget_exceeded = false;  // the pool could not hold the item's pages
  std::string message;           // why it failed (one line), empty when ok
};

class TKV_API Engine {
 public:
  // Loads and validates the model (Error naming the file otherwise).
  explicit Engine(const std::string& model_path, const EngineOptions& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe (const).
  std::vector<int32_t> tokenize(std::string_view text, bool add_bos,
                                bool parse_special = true) const;
  // The text of `tokens` as a stream would show it (what `turbokv run`
  // echoes for a prompt).
  std::string detokenize(std::span<const int32_t> tokens) const;
  int32_t n_vocab() const;
  int context_size() const;
  bool is_end_of_generation(int32_t token) const;
  PoolStats pool_stats() const;

  // A new empty sequence; BudgetExceeded when the pool cannot hold its
  // sinks and residual ring.
  Sequence new_sequence();

  // Appends each entry's tokens to its sequence in one batched forward:
  // every weight matmul runs once over the rows of all entries (decode
  // tokens of many sequences and prefill chunks mixed; long inputs in
  // rounds of ubatch tokens), attention per sequence. Each sequence's
  // logits() are then what eval() alone would give. One outcome per entry:
  // a failed entry (no room, budget, a sequence twice or of another
  // engine) leaves the others running and keeps the rounds it finished.
  // Serialized per engine like eval.
  std::vector<BatchOutcome> eval_batch(std::span<const BatchEntry> entries);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

class TKV_API Sequence {
 public:
  Sequence(Sequence&&) noexcept;
  Sequence& operator=(Sequence&&) noexcept;
  ~Sequence();

  // Shares every page of this sequence (copy-on-write); BudgetExceeded when
  // the pool cannot hold the new sinks and ring.
  Sequence fork() const;
  void truncate(int64_t n_tokens);  // keep the first n tokens
  void clear();
  const std::vector<int32_t>& tokens() const;
  // Tokens that can still be appended before the context is full.
  int64_t room() const;

  // Appends `tokens` (prefill in ubatch chunks) and returns the logits
  // (n_vocab values) predicting the next token; valid until the next call
  // on this sequence. Error, sequence unchanged, when they do not fit.
  std::span<const float> eval(std::span<const int32_t> tokens);
  // The logits of the last eval (empty after truncate/clear/load).
  std::span<const float> logits() const;

  // Samples from logits(), streams the text, feeds each token back. The
  // sampler sees the sequence's tokens first (repetition penalty). The
  // text is spelled as it would be in the decoded whole sequence.
  GenerateResult generate(const GenerateParams& params, const TextCallback& on_text);

  // One session file (the KV pages, the token ids), written atomically.
  void save(const std::string& path) const;
  // Transactional: a corrupt file, another model or KV settings, or no room
  // in the pool throws Error and leaves the sequence as it was.
  void load(const std::string& path);

  struct Impl;

 private:
  friend class Engine;
  explicit Sequence(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Sampling state (random stream, recent tokens) for a caller's own loop.
class TKV_API Sampler {
 public:
  explicit Sampler(const SamplingParams& params);  // Error for a value out of range
  ~Sampler();
  Sampler(Sampler&&) noexcept;
  Sampler& operator=(Sampler&&) noexcept;
  int32_t sample(std::span<const float> logits);
  void accept(int32_t token);  // a token now in the sequence (penalty window)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// TKV_ABI_VERSION of the library loaded at run time.
TKV_API int abi_version();
TKV_API std::string version();

}  // namespace turbokv
