// The scheduler's inside (scheduler.h): the state shared between the
// public side (submit, stats, drain: any thread, under `mu`) and the worker
// thread (everything else: sequences, prefix cache, disk tier, the model's
// context and thread pool, owned by the worker alone). scheduler.cc holds
// the public side and admission, scheduler_step.cc one step of the batch.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/thread_pool.h"
#include "common/timer.h"
#include "kv/page_pool.h"
#include "model/context.h"
#include "runtime/sequence.h"
#include "sample/sampler.h"
#include "server/cache_dir.h"
#include "server/cache_writer.h"
#include "server/prefix_cache.h"
#include "server/scheduler.h"

namespace tkv::server {

// A job between submit() and admission.
struct Pending {
  Job job;
  std::shared_ptr<JobStream> stream;
  Stopwatch since_submit;
  int overtaken = 0;  // later jobs admitted while it waited for the budget
};

// An admitted job: its sequence (which owns the prompt still to prefill, the
// sampler, the reply's stop rules and text) and what the server reports.
struct Active {
  // Starts the reply of `p` on `seq`, which holds `cached` tokens of the
  // prompt already (a prefix from the cache); the rest is queued.
  Active(Pending p, std::unique_ptr<runtime::Sequence> seq, int64_t cached);
  // Choice `c` of `first`'s job, on `seq` forked from it once the prompt
  // is in: its own sampler (seed + c) and reply, nothing queued.
  Active(const Active& first, std::unique_ptr<runtime::Sequence> seq, int c);
  // The sampler and the reply from the job, the prompt's rest queued.
  void start_reply();

  // The prompt is in: the sequence's queue holds its next token.
  bool decoding() const {
    return int64_t(sequence->tokens().size()) >= int64_t(pending.job.prompt.size());
  }
  int64_t generated() const { return sequence->reply().generated(); }

  Pending pending;
  std::unique_ptr<runtime::Sequence> sequence;  // null once finished
  int64_t cached_tokens = 0;                    // prompt tokens reused from the prefix cache
  int choice = 0;       // of the job's choices (Event::choice = first_choice + choice)
  bool forked = false;  // the job's further choices were made
  // Positions where the sequence is forked into the prefix cache before the
  // chunk starting there runs (ascending; Scheduler::Impl::checkpoints).
  std::vector<int64_t> checkpoints;
  double queued_seconds = 0;
  uint64_t reserved_bytes = 0;  // the admission's estimate of its pages
  double first_token_seconds = 0;
  Event out;  // the kText event being filled this step
  // The reply's last token, sampled and not fed, once the reply ended on it
  // (its end-of-turn token, or the one that reached the limit); -1: none.
  int32_t end_token = -1;
  // The job is done and its client told; the sequence stays one more step
  // to take in end_token before it goes to the prefix cache (finish()).
  bool closing = false;
};

struct Scheduler::Impl {
  Impl(const model::Model& model, const tok::Tokenizer& tokenizer, const SchedulerOptions& options);

  // Public side, under mu.
  std::mutex mu;
  std::condition_variable wake;
  std::deque<Pending> queue;
  bool accepting = true;
  bool stopping = false;  // drain(): finish, then exit
  std::optional<std::chrono::steady_clock::time_point> cancel_at;
  SchedulerStats counters;  // the worker's figures, copied under mu after each step
  // Places in the running batch the worker has not filled (parallel less
  // the jobs still running, as of its last admission, step or finished
  // job): that many queued jobs are about to start, not waiting beyond
  // `parallel`, so they do not count against queue_capacity.
  int free_slots = 0;
  // A free slot taken by the job admit() is starting (see there). claim()
  // and release_locked() run under mu; the destructor takes it.
  struct SlotClaim {
    Impl& impl;
    bool held = false;
    void claim() {
      held = true;
      impl.free_slots = std::max(0, impl.free_slots - 1);
    }
    void release_locked() {
      if (held) ++impl.free_slots;
      held = false;
    }
    void keep() { held = false; }
    ~SlotClaim() {
      if (!held) return;
      const std::lock_guard<std::mutex> lock(impl.mu);
      release_locked();
    }
  };
  std::once_flag drained;
  std::thread thread;

  // Worker side.
  const model::Model& model;
  const tok::Tokenizer& tokenizer;
  const SchedulerOptions& options;
  std::shared_ptr<kv::PagePool> pages;
  ThreadPool threads;
  model::ExecutionContext ctx;
  std::unique_ptr<CacheDir> disk;
  std::unique_ptr<CacheWriter> writer;          // with disk: its writes, off this thread
  std::unique_ptr<PrefixCache> prefixes;        // null: prefix caching off
  std::vector<std::unique_ptr<Active>> active;  // in admission order
  // Estimate of a sequence's pool bytes: fixed (sinks, residual ring) plus
  // whole pages per token (admission only; the pool has the final word).
  uint64_t fixed_bytes = 0;
  double bytes_per_token = 0;
  // Attention's FLOPs per query and key over a layer's matrix FLOPs per
  // token (the prefill budget's depth term).
  double attention_per_key = 0;
  SchedulerStats figures;  // worker's running totals
  bool cache_changed = true;

  void run();    // the worker loop
  void admit();  // scheduler.cc
  // admit()'s parts: the cached prefix a job starts from (none when the
  // cache cannot give one), whether its pages fit next to the running jobs'
  // (kFailed: never; the job was answered), its sequence (a fork of the
  // prefix, the prefix itself, or a new one; cached prefixes give way), and
  // the job running.
  enum class Admission { kStart, kBlocked, kFailed };
  // A prompt off the grid is found only whole: its entry's logits go to
  // `whole_logits`.
  PrefixCache::Hit find_prefix(const Pending& p, bool on_grid, std::vector<float>& whole_logits);
  Admission check_budget(Pending& p, const PrefixCache::Hit& hit, uint64_t need);
  Admission make_sequence(Pending& p, PrefixCache::Hit& hit, bool on_grid,
                          std::unique_ptr<runtime::Sequence>& out);
  Active& start(Pending p, std::unique_ptr<runtime::Sequence> sequence, const PrefixCache::Hit& hit,
                uint64_t need, bool on_grid);
  bool step();  // scheduler_step.cc: false when nothing ran
  // One step's batch: its items, the job of each, and what it carries.
  struct Batch {
    std::vector<model::BatchItem> items;
    std::vector<Active*> owner;
    StepInfo info;
    void add(Active& a, model::BatchItem item) {
      items.push_back(item);
      owner.push_back(&a);
    }
  };
  Batch plan_step();  // the decoding sequences' tokens, then prefill chunks within the budget
  // The job's reply takes the logits after its newest token: a token
  // streamed and queued, or the job's end.
  void sample_reply(Active& a, std::span<const float> logits);
  struct OutOfPages {
    Active* job;
    std::string message;
  };
  // An item eval_batch failed: out of pages (cached prefixes give way, or
  // the job joins `out_of_pages`), or a disk-tier failure that ends its job.
  void item_failed(Active& a, const model::BatchItem& item, const model::ItemStatus& s,
                   std::vector<OutOfPages>& out_of_pages);
  void finish(Active& a, JobFinish reason, std::string error = {}, bool budget = false);
  // Ends the job's choices from `from_choice` on (none of them started).
  void fail_pending(Pending& p, JobFinish reason, std::string error, bool budget,
                    int from_choice = 0);
  // The prompt of `a`'s job is in: its further choices fork its sequence
  // (pages shared, copy-on-write) and join `active`; returned for the
  // caller to sample their first token from the prompt's logits. None when
  // the job has one choice or forked already.
  std::vector<Active*> fork_choices(Active& a);
  uint64_t estimate_bytes(int64_t tokens) const;
  // Whether a prompt of this length is prefilled in chunks of the grid
  // (else as one chunk from where its prefill starts: whole_prompt_tokens).
  bool prefilled_on_grid(int64_t prompt_len) const;
  // Where a job of this prompt leaves checkpoints in the prefix cache.
  std::vector<int64_t> checkpoints(const Job& job, const PrefixCache::Hit& hit) const;
  // Forks `a` into the prefix cache when its next chunk starts at its next
  // checkpoint (a fork the budget cannot hold is skipped).
  void take_checkpoint(Active& a);
  // Keeps a finished job's sequence, prompt and reply, in the prefix cache
  // where reuse need not be exact (SchedulerOptions::exact_reuse).
  void keep_finished(Active& a);
  bool keeps_finished(const Active& a) const;
  // A prompt prefilled whole just ended (`logits` after its last token):
  // its sequence and logits go to the prefix cache (prefix_cache.h).
  void keep_whole_prompt(Active& a, std::span<const float> logits);
  bool admitted_before(const Active& x, const Active& y) const;  // x earlier in `active`
  // Evicts the least recently used cached prefix, then more until the pool
  // has `bytes` free under its budget or none is left; false when there was
  // none to evict. Pages that evicted prefixes hold until the background
  // writer has written them are waited for when the pool needs them.
  bool make_room(uint64_t bytes);
  std::unique_ptr<runtime::Sequence> new_sequence() const;
  uint64_t ram_bytes() const;  // the pool's bytes that count against the budget
  // With the disk tier: cached prefixes leave RAM (evicted) before the
  // step's new pages would push running sequences' pages to disk.
  void evict_before_spilling();
  void publish();          // copies the figures into counters (takes mu)
  void note_free_slots();  // free_slots from running() (takes mu)
  // Jobs of `active` still running: one that ended this step stays in
  // `active` until the step is over, its place free already.
  int running() const;
  void warn(const std::string& message) const;
};

}  // namespace tkv::server
