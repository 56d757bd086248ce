// The continuous-batching scheduler of `turbokv serve`: many conversations
// decode together on one model, one compressed page pool and one worker.
//
// One worker thread owns the ExecutionContext and the ThreadPool and loops:
//   1. drop cancelled jobs (their pages go back to the pool);
//   2. admit queued jobs while fewer than `parallel` run and the pool's
//      budget allows: each starts from the longest cached prefix of its
//      prompt (prefix_cache.h: forked pages, copy-on-write) or empty;
//   3. one Model::eval_batch with every decoding sequence's last token plus
//      prefill chunks of admitting ones (a short prompt whole, a longer one
//      on the grid): at most one chunk per sequence, and
//      while any sequence decodes at most `prefill_tokens_per_step` tokens'
//      worth of prefill work (a chunk larger than that runs a few of its
//      layers per step), so a long prompt arriving costs each of the other
//      streams' steps a bounded slice of work instead of freezing them for
//      its whole prefill; when none decodes, every admitting sequence's next
//      chunk goes in the step whole (or what is left of it);
//   4. sample each sequence from its logits, stream its text (TextStream:
//      the same decoder + stop strings as `turbokv run`), finish the ones
//      that stopped: their sequences go to the prefix cache. A job of
//      several choices (Job::choices) forks its sequence once its prompt
//      is in, one sequence per choice sharing the prompt's pages.
//
// Reproducibility: a greedy job gives the same tokens whether it runs alone
// or with any others. Model::eval_batch is batch-invariant (model.h); what
// is not is the chunking of a prompt and the thread count, so prompts are
// cut on a fixed grid of absolute positions (multiples of prefill_chunk,
// whatever the load: a chunk that does not fit a step waits for the next
// one, it is never cut shorter) and the thread count is fixed.
//
// Memory: one kv::PagePool of budget_bytes holds every running sequence
// and every cached prefix. A job is admitted when its estimated pages
// (prompt + max_tokens, capped by the context, less what it shares with its
// cached prefix) fit next to the running jobs' estimates (a job that does
// not fit yet may be passed by later ones, a bounded number of times:
// SchedulerOptions::max_overtakes); cached prefixes give way on demand
// (LRU). An item of a step that cannot get its pages evicts cached
// prefixes and runs again next step; with nothing left to evict, the most
// recently admitted of the jobs that ran out fails (budget_error) and the
// others go on.
//
// Threads: submit(), stats() and drain() may be called from any thread; a
// JobStream is read by one consumer thread (the HTTP handler), cancel() from
// any.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "kv/kv_config.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

namespace tkv::server {

// What one step of the batch evaluated.
struct StepInfo {
  int decode_tokens = 0;   // decoding sequences (one token each)
  int prefill_chunks = 0;  // admitting sequences with a chunk (or a part of one) in the step
  int prefill_tokens = 0;  // the chunks' tokens
  // The prefill work: each chunk's tokens x the layers it runs in this
  // step (a chunk run whole counts tokens x the model's layers).
  int64_t prefill_token_layers = 0;
  // The same in the unit of prefill_tokens_per_step x layers: a chunk's
  // rows through one layer at depth d cost tokens x (1 + attention's FLOPs
  // per query and key / the layer matrices' per token x d); what a step
  // carries while others decode.
  double prefill_work = 0;
  int split_chunks = 0;  // chunks of which only some layers run in this step
};

// With none decoding, short prompts' whole chunks (SchedulerOptions::
// whole_prompt_tokens) join a step while its prefill rows stay within this
// many (the rows of a step are held at once: this bounds the activations of
// a burst of short prompts); the step's first always does.
inline constexpr int kWholePromptRowsPerStep = 2048;

struct SchedulerOptions {
  int parallel = 4;         // sequences decoding at once (--parallel)
  int queue_capacity = 64;  // jobs waiting beyond `parallel`; submit() past it: QueueFull
  // A queued job whose pages do not fit the budget next to the running
  // jobs' yet lets later jobs that fit go first, at most this many times;
  // then nothing behind it is admitted until it fits (no job waits behind
  // a big one forever, and a big one is not starved by a stream of small
  // ones). 0: strictly first come, first served.
  int max_overtakes = 8;
  int context = 4096;  // tokens per sequence (-c; not divided by `parallel`); <= 0: the model's
  // The prefill grid: prompts are evaluated in chunks [k*C, (k+1)*C) of
  // absolute positions (the last one shorter). Fixed for the scheduler's
  // life: it decides the bits of the prefill (model.h). Chunks of at most
  // 16 tokens (kIntMatmulMaxTokens) take the decode path's kernels, in the
  // same weight pass as the decode tokens; larger ones the prefill GEMM.
  // docs/results/serve.md has the figures.
  int prefill_chunk = 16;
  // Prompts of at most this many tokens are prefilled as one chunk, from
  // where their prefill starts (0, or the end of their cached prefix) to
  // their end, off the grid: a chunk over 16 tokens takes the prefill GEMM,
  // which runs a burst of short prompts faster than the small-batch
  // product, and a prompt alone gets the bits `turbokv run` gives it with
  // its default -ub. Decided by the prompt alone, so batch invariance
  // holds. While others decode such a chunk runs in layer parts within the
  // step's prefill budget (one grid chunk's work through every layer by
  // default). Longer prompts stay on the grid (a long prompt next to
  // decoding streams rides in their weight pass). 0: every prompt on the
  // grid. docs/results/serve.md has the figures.
  int whole_prompt_tokens = 256;
  // While any sequence decodes, the prefill a step carries. 0: one chunk,
  // whole (chunks of several sequences while they fit in prefill_chunk
  // tokens; a whole-prompt chunk over prefill_chunk tokens runs as many of
  // its layers as that much work allows). N > 0: at most the work of N
  // tokens through every layer at depth 0, a deep chunk's attention counted
  // (StepInfo::prefill_work); a chunk that fits runs whole, a larger one in
  // layer parts of equal size over the fewest steps that budget allows (at
  // least one layer when it is the step's first), the rest in the next
  // steps (Model::eval_batch's layer-split items: the same bits as whole).
  // Several admitting sequences share it in admission order. Bounds how
  // much slower a decoding stream's step is while others prefill. The
  // default, 16, is one grid chunk's work at depth 0: past depth 0 a grid
  // chunk's attention puts it over, so it runs in two steps of half its
  // layers until the depth where attention alone outweighs the matrices:
  // the other streams' worst steps shorter than with the chunk whole, for a
  // long prompt's first token later; a short prompt's whole chunk next to
  // decoding streams takes a grid chunk's work a step, as with 0
  // (docs/results/serve.md has the figures).
  int prefill_tokens_per_step = 16;
  kv::KvConfig kv;            // codecs, page size; kv.budget_bytes, kv.spill_dir are not used
  uint64_t budget_bytes = 0;  // the page pool's byte budget (--kv-budget), 0 = unlimited
  // The pool's disk tier (--kv-spill-dir; needs a budget): past the budget
  // the coldest pages move to a page file there, so a job is no longer
  // refused or held back for its pages, and cached prefixes are evicted
  // (to cache_dir, or dropped) before any running job's pages spill. A disk
  // failure ends only the job whose step it hit (Event::error).
  std::string spill_dir;
  int threads = 1;           // the worker's ThreadPool (counts the worker itself)
  bool prefix_cache = true;  // keep finished sequences for reuse (off under kv.window > 0)
  // Where a cached prefix is reused (--prefix-reuse). true ("exact"): at
  // grid boundaries only, so a reused prefix holds the bits a cold prefill
  // gives and a cached prefix never changes an answer (ReuseRule); up to
  // prefill_chunk - 1 shared tokens are prefilled again. false ("any"), as
  // llama-server reuses its slots: also at the prompt's end and into a
  // finished reply (prefix_cache.h), the last partial chunk and the decoded
  // tokens held as they were computed, which may differ from a cold
  // prefill's in their last bits.
  bool exact_reuse = true;
  // Cached prefixes kept in memory at most (LRU beyond it, to the cache dir
  // when there is one); the budget evicts sooner when it needs their pages.
  int max_cached_prefixes = 256;
  std::string cache_dir;             // disk tier of the prefix cache ("" = none)
  uint64_t cache_dir_max_bytes = 0;  // bound of cache_dir's session files, 0 = unbounded
  // Called on the worker with what each step evaluates, before it runs
  // (tests, figures).
  std::function<void(const StepInfo&)> on_step;
  // Called on the worker when it takes a job off the queue to start it,
  // before its prefix lookup and pages (tests).
  std::function<void()> on_admit;
  // Called on the worker after a running job's last event is pushed, before
  // the step goes on (tests).
  std::function<void()> on_finish;
  // Where warnings go (a cache dir that cannot be written, a corrupt cache
  // file); default: "turbokv: warning: ..." on stderr.
  std::function<void(const std::string&)> on_warning;
};

// submit() refused the job because the queue is full (HTTP 503 +
// Retry-After). Other tkv::Error from submit() are the request's fault
// (HTTP 400), except NotAccepting.
class QueueFull : public Error {
 public:
  using Error::Error;
};
// submit() after drain() started (HTTP 503).
class NotAccepting : public Error {
 public:
  using Error::Error;
};

struct Job {
  std::vector<int32_t> prompt;  // token ids, BOS included when the model wants one
  sample::SamplerConfig sampling;
  int64_t max_tokens = -1;           // < 0: until a stop or the context is full
  std::vector<std::string> stops;    // stop strings (not shown, not in the text)
  std::vector<int32_t> stop_tokens;  // end the reply like EOG tokens (end-of-turn ids)
  bool render_special = false;       // control tokens appear in the text as they are spelled
  // Makes the rule on which tokens may come next (a grammar: structured
  // output), called once per choice so that each has its own state; empty
  // for free text. The sampler applies it after the prompt.
  std::function<std::shared_ptr<sample::TokenConstraint>()> constraint;
  // < 0: no logprobs; 0: the chosen token's logprob; N > 0: also the N most
  // likely tokens of the model's distribution (log-softmax of the logits,
  // before temperature and filters).
  int top_logprobs = -1;
  // Prompt positions where later prompts are likely to part from this one
  // (a chat's last message starts there: the next conversation with the
  // same system prompt, an edited or regenerated last turn; its generation
  // prompt starts there: the next turn renders the reply). A prompt on
  // the grid leaves a checkpoint at the last grid boundary at or before
  // each, as it does at its own last boundary; where reuse need not be
  // exact and checkpoints cannot be cut (a recurrent state), at each
  // position itself (its chunk is cut there).
  std::vector<int64_t> checkpoint_hints;
  // Replies to this prompt (OpenAI's n): the prompt is prefilled once, then
  // its sequence is forked (every page shared, copy-on-write) into one
  // sequence per choice, choice c sampling with seed sampling.seed + c.
  int choices = 1;
  // Event::choice of this job's choice 0 (a request of several jobs
  // numbers its choices across them).
  int first_choice = 0;
  // false: prefill the whole prompt, reusing no cached prefix (the prompt
  // still leaves its checkpoints).
  bool cache_prompt = true;
};

struct TopToken {
  int32_t token = 0;
  float logprob = 0;
};

// One generated token with its logprobs (Job::top_logprobs >= 0).
struct GeneratedToken {
  int32_t token = 0;
  float logprob = 0;          // of `token` (0 when not asked)
  std::vector<TopToken> top;  // most likely first (top_logprobs entries)
};

enum class JobFinish {
  kStop,       // an EOG / stop token (not shown) or a stop string
  kLength,     // max_tokens, or the context is full
  kCancelled,  // JobStream::cancel(), or drain() ran out of grace
  kError,      // see Event::error
};
const char* job_finish_name(JobFinish reason);  // "stop", "length", "cancelled", "error"

struct JobTimings {
  double queued_seconds = 0;       // submit -> admitted
  double first_token_seconds = 0;  // submit -> first token sampled (TTFT)
  double total_seconds = 0;        // submit -> finished
};

struct Event {
  // Which choice the event belongs to (Job::first_choice + c).
  int choice = 0;
  enum class Kind {
    kText,  // text + tokens: the next piece of the reply
    kDone,  // the last event of a job (also after an error)
  };
  Kind kind = Kind::kText;
  // kText: text safe to show (may be empty when the token's bytes are held
  // back: a split UTF-8 character, a possible stop string) and the tokens
  // sampled since the previous event (their text may come in a later one).
  std::string text;
  std::vector<GeneratedToken> tokens;
  // kDone:
  JobFinish finish = JobFinish::kStop;
  std::string error;          // kError: one line (budget, NaN, context, ...)
  bool budget_error = false;  // kError because the KV budget could not hold the job
  std::string stop_string;    // the stop string that matched, if any
  // The job's prompt, and of it the tokens reused from the prefix cache:
  // on each choice's kDone (count them once per job).
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t completion_tokens = 0;  // tokens generated (stop tokens not counted)
  JobTimings timings;
};

// The consumer's end of one submission: each choice's events in order,
// ending with its kDone; the choices' events interleave.
class JobStream {
 public:
  // `choices`: the kDone events that end the stream.
  explicit JobStream(int choices = 1) : remaining_(choices) {}

  // Waits up to `timeout` for the next event; nullopt on timeout (check the
  // client, call again). After the last kDone event, returns nullopt at once.
  std::optional<Event> next(std::chrono::milliseconds timeout);
  // Asks the worker to stop the jobs (client gone): they finish with
  // kCancelled at the next step and its pages are freed. Idempotent.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  // Worker side.
  void push(Event event);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  int remaining_;          // kDone events still to come
  int unconsumed_ = 0;     // kDone events queued, not handed out
  bool consumed_ = false;  // the last kDone handed out
  std::atomic<bool> cancelled_{false};
};

struct SchedulerStats {
  uint64_t kv_bytes_in_use = 0;   // the page pool's live bytes (running + cached)
  uint64_t kv_budget = 0;         // 0 = unlimited
  uint64_t kv_shared_bytes = 0;   // held by more than one sequence (forked prefixes)
  uint64_t kv_spilled_bytes = 0;  // of kv_bytes_in_use, on the disk tier (spill_dir)
  int64_t kv_pages = 0;
  int active = 0;  // sequences admitted (prefilling or decoding)
  int queued = 0;
  int cached_prefixes = 0;    // in RAM
  uint64_t cached_bytes = 0;  // pool bytes the cached prefixes share with no running sequence
  int disk_prefixes = 0;
  uint64_t disk_bytes = 0;
  uint64_t prefix_hits = 0;  // jobs that reused a cached prefix
  uint64_t prefix_tokens_reused = 0;
  uint64_t prefix_evictions = 0;  // cached prefixes evicted from RAM (to the cache dir or dropped)
  uint64_t disk_loads = 0;        // prefixes read back from the cache dir
  uint64_t prompt_tokens = 0;     // of finished jobs
  // Prompt tokens run through the model: none of those reused from the
  // prefix cache, and a prompt forked into n choices once.
  uint64_t prompt_tokens_prefilled = 0;
  uint64_t completion_tokens = 0;
  uint64_t jobs_finished = 0;
  bool accepting = true;  // false once drain() started: submit() throws NotAccepting
};

class Scheduler {
 public:
  // Validates the options (tkv::Error naming the bad one), indexes
  // options.cache_dir (session files of this model, read lazily) and starts
  // the worker. `model` and `tokenizer` outlive the scheduler.
  Scheduler(const model::Model& model, const tok::Tokenizer& tokenizer, SchedulerOptions options);
  ~Scheduler();  // drain(0) unless drain() ran
  // The smallest budget_bytes that serves a request: one sequence's fixed
  // part (sinks, residual ring, recurrent states) and the pages of one
  // prefill chunk (prefill_chunk tokens, at most the context). serve
  // refuses a smaller --kv-budget at start-up.
  static uint64_t smallest_budget(const model::Model& model, const SchedulerOptions& options);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a job. Throws QueueFull when the queue is full, NotAccepting
  // after drain(), tkv::Error for a job that can never run (empty prompt,
  // a token outside the vocabulary, a prompt longer than the context, bad
  // sampler settings, an empty stop string).
  std::shared_ptr<JobStream> submit(Job job);
  // Several jobs of one request on one stream (Job::first_choice numbers
  // their choices), all queued or none.
  std::shared_ptr<JobStream> submit(std::vector<Job> jobs);

  SchedulerStats stats() const;
  const SchedulerOptions& options() const { return options_; }
  // Tokens per sequence (options.context, or the model's trained context
  // when that is <= 0): a prompt may have at most this many.
  int context_size() const { return options_.context; }

  // Stops admitting (submit: NotAccepting, queued jobs finish kCancelled),
  // lets running jobs finish for up to `grace`, cancels the rest, writes the
  // cached prefixes to the cache dir and stops the worker. Idempotent.
  void drain(std::chrono::milliseconds grace);

 private:
  // submit()'s checks of one job (tkv::Error for one that can never run).
  void check_job(Job& job) const;

  struct Impl;  // the queue, the worker thread and its step logic
  SchedulerOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tkv::server
