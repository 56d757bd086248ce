// The scheduler's public side (submit, stats, drain), the job streams, and
// the worker's loop and admission; one step of the batch is in
// scheduler_step.cc.
#include "server/scheduler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <utility>

#include "common/error.h"
#include "runtime/prompt_check.h"
#include "server/scheduler_impl.h"

namespace tkv::server {

const char* job_finish_name(JobFinish reason) {
  switch (reason) {
    case JobFinish::kStop:
      return "stop";
    case JobFinish::kLength:
      return "length";
    case JobFinish::kCancelled:
      return "cancelled";
    case JobFinish::kError:
      return "error";
  }
  return "?";
}

// ---- JobStream ----

std::optional<Event> JobStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (consumed_) return std::nullopt;
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  Event e = std::move(events_.front());
  events_.pop_front();
  if (e.kind == Event::Kind::kDone && --unconsumed_ == 0 && remaining_ == 0) consumed_ = true;
  return e;
}

void JobStream::push(Event event) {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    if (remaining_ == 0) return;
    if (event.kind == Event::Kind::kDone) {
      --remaining_;
      ++unconsumed_;
    }
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

// ---- the worker's state ----

namespace {

// Evicted prefixes waiting for the background writer at most (a next
// eviction waits for room).
constexpr int kCacheWritesQueued = 4;

// From idle, the worker waits for more jobs while they keep arriving: at
// most kIdleSettleSteps gaps of kIdleSettle each (a job alone starts 5 ms
// later, a burst at most 50 ms later): the requests of clients that send
// at once reach the queue some time apart (each is parsed on its own HTTP
// thread), more than a millisecond on busy cores.
constexpr std::chrono::milliseconds kIdleSettle{5};
constexpr int kIdleSettleSteps = 10;

SchedulerOptions resolved(const model::Model& model, SchedulerOptions o) {
  if (o.context <= 0) o.context = model.kv_shape(0).max_tokens;
  if (o.parallel < 1) fail("scheduler: parallel sequences must be >= 1 (got ", o.parallel, ")");
  if (o.queue_capacity < 0) fail("scheduler: queue capacity must be >= 0");
  if (o.context < 1) fail("scheduler: context must be >= 1 token");
  if (o.prefill_chunk < 1) fail("scheduler: prefill chunk must be >= 1 token");
  if (o.whole_prompt_tokens < 0)
    fail("scheduler: whole-prompt tokens must be >= 0 (got ", o.whole_prompt_tokens, ")");
  if (o.prefill_tokens_per_step < 0)
    fail("scheduler: prefill tokens per step must be >= 0 (got ", o.prefill_tokens_per_step, ")");
  if (o.threads < 1) fail("scheduler: threads must be >= 1");
  if (o.max_cached_prefixes < 0) fail("scheduler: max cached prefixes must be >= 0");
  if (o.max_overtakes < 0) fail("scheduler: max overtakes must be >= 0");
  if (!o.spill_dir.empty() && o.budget_bytes == 0)
    fail("scheduler: a spill directory needs a KV budget");
  o.kv.spill_dir.clear();  // the scheduler's pool has the disk tier
  o.kv.budget_bytes = 0;
  if (!o.on_warning)
    o.on_warning = [](const std::string& m) {
      std::fprintf(stderr, "turbokv: warning: %s\n", m.c_str());
    };
  return o;
}

}  // namespace

Active::Active(Pending p, std::unique_ptr<runtime::Sequence> seq, int64_t cached)
    : pending(std::move(p)), sequence(std::move(seq)), cached_tokens(cached) {
  start_reply();
  queued_seconds = pending.since_submit.seconds();
}

Active::Active(const Active& first, std::unique_ptr<runtime::Sequence> seq, int c)
    : pending(first.pending),
      sequence(std::move(seq)),
      cached_tokens(first.cached_tokens),
      choice(c),
      forked(true),
      queued_seconds(first.queued_seconds) {
  pending.job.sampling.seed += uint64_t(c);
  start_reply();  // the prompt is in: nothing queued
}

void Active::start_reply() {
  const Job& job = pending.job;
  // The repetition penalty sees the prompt, and the decoder too: the reply
  // is spelled as it is in the decoded whole (what `turbokv run` prints).
  sequence->set_sampler(job.sampling);
  for (int32_t id : job.prompt) sequence->sampler().accept_prompt(id);
  // Built here, once per choice: a forked choice starts its own grammar state.
  sequence->sampler().set_constraint(job.constraint ? job.constraint() : nullptr);
  sequence->start_reply(
      {.max_tokens = job.max_tokens, .stop_at_eog = true, .stop_tokens = job.stop_tokens},
      {.stops = job.stops,
       .start = tok::StreamDecoder::Start::kTextStart,
       .spelled_after = job.prompt,
       .render_special = job.render_special});
  const size_t fed = sequence->tokens().size();
  if (fed < job.prompt.size()) sequence->queue(std::span<const int32_t>(job.prompt).subspan(fed));
}

namespace {

// An empty sequence's bytes (sinks, residual ring, recurrent states) and
// its pages' bytes per token, from a probe outside any pool.
std::pair<uint64_t, double> sequence_bytes(const model::Model& model,
                                           const SchedulerOptions& options) {
  const kv::KvShape shape = model.kv_shape(options.context);
  const kv::KvCache probe(shape, options.kv);
  const kv::KvStats s = probe.stats();
  return {s.persistent_bytes, (s.k_bytes_per_token_head + s.v_bytes_per_token_head) *
                                  double(shape.n_kv_heads) * double(shape.n_layers)};
}

// What a sequence of `tokens` holds: its fixed part and whole pages.
uint64_t sequence_estimate(uint64_t fixed, double per_token, int64_t page, int64_t tokens) {
  const int64_t pages_needed = (std::max<int64_t>(tokens, 0) + page - 1) / page;
  return fixed + uint64_t(std::ceil(double(pages_needed * page) * per_token));
}

}  // namespace

Scheduler::Impl::Impl(const model::Model& model_, const tok::Tokenizer& tokenizer_,
                      const SchedulerOptions& options_)
    : model(model_),
      tokenizer(tokenizer_),
      options(options_),
      pages(options_.spill_dir.empty()
                ? std::make_shared<kv::PagePool>(options_.budget_bytes)
                : std::make_shared<kv::PagePool>(options_.budget_bytes, options_.spill_dir)),
      threads(options_.threads) {
  free_slots = options.parallel;
  // The estimate's figures, from an empty sequence outside the pool.
  std::tie(fixed_bytes, bytes_per_token) = sequence_bytes(model, options);
  {
    // Per layer: 2 x n_heads x head_dim multiply-adds per query and key
    // (scores and values), against one per weight per token.
    const model::ModelConfig& c = model.config();
    const double matrices = double(c.n_embd) * (2.0 * c.q_dim() + 2.0 * c.kv_dim()) +
                            3.0 * double(c.n_embd) * double(c.n_ff);
    attention_per_key = 2.0 * c.n_heads * c.head_dim / matrices;
  }
  const bool cacheable = options.prefix_cache && options.kv.window == 0;
  // A checkpoint serves its grid prefixes too when truncating it loses
  // nothing: no residual ring (unless reuse need not be exact), no window
  // layer that dropped its pages, and no recurrent layer (its state holds
  // the checkpoint's position only).
  const ReuseRule rule{
      .grid = options.prefill_chunk,
      .truncatable = (options.kv.effective_residual() == 0 || !options.exact_reuse) &&
                     !options.kv.swa_window_only &&
                     model.kv_shape(options.context).recurrent.empty(),
      .exact = options.exact_reuse};
  if (cacheable && !options.cache_dir.empty()) {
    // Everything that decides a prefill's bits: a file made under another
    // grid or thread count would not give this server's cold logits.
    const kv::KvShape shape = model.kv_shape(options.context);
    const std::string key =
        str(model.fingerprint(), " ", options.kv.describe_storage(), " ctx=", shape.max_tokens,
            " seed=", options.kv.seed, " grid=", options.prefill_chunk,
            " threads=", options.threads, options.exact_reuse ? "" : " reuse=any");
    disk = std::make_unique<CacheDir>(options.cache_dir, options.cache_dir_max_bytes, key,
                                      options.kv.page_tokens, rule, options.on_warning);
  }
  if (disk) writer = std::make_unique<CacheWriter>(*disk, kCacheWritesQueued);
  if (cacheable)
    prefixes = std::make_unique<PrefixCache>(options.kv.page_tokens, rule,
                                             options.max_cached_prefixes, disk.get(), writer.get());
  figures.kv_budget = options.budget_bytes;
}

uint64_t Scheduler::Impl::estimate_bytes(int64_t tokens) const {
  return sequence_estimate(fixed_bytes, bytes_per_token, options.kv.page_tokens, tokens);
}

uint64_t Scheduler::smallest_budget(const model::Model& model, const SchedulerOptions& options) {
  const auto [fixed, per_token] = sequence_bytes(model, options);
  return sequence_estimate(fixed, per_token, options.kv.page_tokens,
                           std::min(options.context, options.prefill_chunk));
}

std::vector<int64_t> Scheduler::Impl::checkpoints(const Job& job,
                                                  const PrefixCache::Hit& hit) const {
  // The prompt's last grid boundary (the next turn of a conversation, a
  // regenerated reply, the same request again start there) and, when reuse
  // need not be exact, its end; without a truncatable cache the boundary
  // where it parted from a cached prompt
  // (a system prompt the next conversations share) and those at or before
  // the job's hints (where its last message starts: the next conversation
  // parts there on its first visit).
  const int64_t prompt_len = int64_t(job.prompt.size());
  const ReuseRule& rule = prefixes->rule();
  const int64_t last = rule.boundary(prompt_len, prompt_len);
  std::vector<int64_t> at;
  if (!rule.truncatable) {
    if (hit.shared > hit.reuse && hit.shared < last) at.push_back(hit.shared);
    for (int64_t h : job.checkpoint_hints) {
      const int64_t b = h <= 0 || h >= prompt_len ? 0
                        : rule.exact              ? rule.boundary(h, prompt_len)
                                                  : h;
      if (b > hit.reuse && b < (rule.exact ? last : prompt_len)) at.push_back(b);
    }
  }
  if (last > hit.reuse) at.push_back(last);
  // Reuse that need not be exact keeps the prompt's end too (after its last
  // chunk: Scheduler::Impl::step): the next turn starts there. A checkpoint
  // that cannot be cut keeps the position before it as well: the next turn
  // often renders the prompt's last token otherwise (a "\n" that the
  // reply's text joins into "\n\n", a reasoning section opened by the
  // generation prompt and closed in the history).
  if (!rule.exact) {
    if (!rule.truncatable && prompt_len - 1 > hit.reuse) at.push_back(prompt_len - 1);
    if (prompt_len > hit.reuse) at.push_back(prompt_len);
  }
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  return at;
}

bool Scheduler::Impl::prefilled_on_grid(int64_t prompt_len) const {
  return prompt_len > options.whole_prompt_tokens;
}

bool Scheduler::Impl::make_room(uint64_t bytes) {
  if (!prefixes) return false;
  const auto fits = [&] {
    return options.budget_bytes == 0 || ram_bytes() + bytes <= options.budget_bytes;
  };
  // Evicted prefixes still being written hold their pages until then: when
  // the pool needs them, wait for the writer rather than evict more.
  const auto wait_for_writes = [&] {
    if (!writer || writer->pending() == 0) return false;
    writer->wait_idle();
    return true;
  };
  if (prefixes->size() == 0) return wait_for_writes();
  // At least one goes (an allocation failed, whatever the figures say), then
  // more until the bytes fit.
  do {
    prefixes->evict_lru();
    if (!fits()) wait_for_writes();
  } while (prefixes->size() > 0 && !fits());
  cache_changed = true;
  return true;
}

uint64_t Scheduler::Impl::ram_bytes() const {
  // With the disk tier, live bytes include those on disk; what counts
  // against the budget is what is in RAM (free-listed bytes included).
  return pages->spilling() ? pages->stats().bytes_reserved : pages->bytes_in_use();
}

void Scheduler::Impl::evict_before_spilling() {
  if (!pages->spilling() || !prefixes || prefixes->size() == 0) return;
  // Room for this step's new pages: one per sequence (a decode token may
  // open a page) and the prefill tokens of the step.
  const int64_t page = options.kv.page_tokens;
  const int64_t new_tokens =
      int64_t(active.size()) * page +
      std::max({options.prefill_tokens_per_step, options.prefill_chunk,
                std::min(options.whole_prompt_tokens, kWholePromptRowsPerStep)});
  const uint64_t bytes = uint64_t(std::ceil(double(new_tokens) * bytes_per_token));
  if (ram_bytes() + bytes > options.budget_bytes) make_room(bytes);
}

std::unique_ptr<runtime::Sequence> Scheduler::Impl::new_sequence() const {
  // The sequence's own ThreadPool reference is not used: the worker feeds it
  // through eval_batch on `threads`.
  return std::make_unique<runtime::Sequence>(model, tokenizer, options.context, options.kv, pages,
                                             const_cast<ThreadPool&>(threads),
                                             options.prefill_chunk);
}

void Scheduler::Impl::warn(const std::string& message) const {
  options.on_warning(message);
}

void Scheduler::Impl::publish() {
  figures.active = running();
  const kv::PoolStats p = pages->stats();
  figures.kv_bytes_in_use = p.bytes_in_use;
  figures.kv_shared_bytes = p.shared_bytes;
  figures.kv_spilled_bytes = p.spilled_bytes;
  figures.prefix_evictions = prefixes ? prefixes->evictions() : 0;
  figures.kv_pages = p.pages;
  if (cache_changed) {
    figures.cached_prefixes = prefixes ? prefixes->size() : 0;
    figures.cached_bytes = prefixes ? prefixes->exclusive_bytes() : 0;
    figures.disk_loads = prefixes ? prefixes->disk_loads() : 0;
    cache_changed = false;
  }
  // The writer adds files on its own thread.
  figures.disk_prefixes = disk ? disk->files() : 0;
  figures.disk_bytes = disk ? disk->bytes() : 0;
  const std::lock_guard<std::mutex> lock(mu);
  const int queued = counters.queued;
  counters = figures;
  counters.queued = queued;
  free_slots = std::max(0, options.parallel - figures.active);
}

int Scheduler::Impl::running() const {
  // A closing sequence's job is done: its place is free.
  return int(std::count_if(active.begin(), active.end(),
                           [](const auto& a) { return a->sequence != nullptr && !a->closing; }));
}

void Scheduler::Impl::note_free_slots() {
  const int n = running();
  const std::lock_guard<std::mutex> lock(mu);
  free_slots = std::max(0, options.parallel - n);
}

void Scheduler::Impl::fail_pending(Pending& p, JobFinish reason, std::string error, bool budget,
                                   int from_choice) {
  // Every choice not started yet ends here (the stream waits for each).
  for (int c = from_choice; c < p.job.choices; ++c) {
    Event done;
    done.choice = p.job.first_choice + c;
    done.kind = Event::Kind::kDone;
    done.finish = reason;
    done.error = error;
    done.budget_error = budget;
    done.prompt_tokens = int64_t(p.job.prompt.size());
    done.timings.queued_seconds = done.timings.total_seconds = p.since_submit.seconds();
    p.stream->push(std::move(done));
  }
}

// ---- admission ----

PrefixCache::Hit Scheduler::Impl::find_prefix(const Pending& p, bool on_grid,
                                              std::vector<float>& whole_logits) {
  if (!prefixes || !p.job.cache_prompt) return {};
  if (!on_grid) {
    // A prompt prefilled whole: reused only whole (prefix_cache.h).
    PrefixCache::WholeHit whole = prefixes->find_whole(p.job.prompt);
    if (!whole.session) return {};
    whole_logits = std::move(whole.logits);
    return {.session = whole.session, .reuse = int64_t(p.job.prompt.size())};
  }
  try {
    PrefixCache::Hit hit = prefixes->find(p.job.prompt, [&] { return new_sequence(); });
    if (hit.session) cache_changed = true;
    return hit;
  } catch (const kv::KvBudgetExceeded&) {
    return {};  // reading a file back did not fit: start cold
  } catch (const kv::KvOutOfMemory&) {
    return {};
  }
}

Scheduler::Impl::Admission Scheduler::Impl::check_budget(Pending& p, const PrefixCache::Hit& hit,
                                                         uint64_t need) {
  // With the disk tier the pool holds any job: nothing is refused or held
  // back for its pages.
  if (options.budget_bytes == 0 || pages->spilling()) return Admission::kStart;
  const int64_t prompt_len = int64_t(p.job.prompt.size());
  if (estimate_bytes(prompt_len - hit.reuse) > options.budget_bytes) {
    fail_pending(
        p, JobFinish::kError,
        str("the KV budget of ", options.budget_bytes, " bytes cannot hold this ", prompt_len,
            "-token prompt (about ", estimate_bytes(prompt_len - hit.reuse), " bytes)"),
        true);
    return Admission::kFailed;
  }
  uint64_t reserved = 0;
  for (const auto& a : active) reserved += a->reserved_bytes;
  return !active.empty() && reserved + need > options.budget_bytes ? Admission::kBlocked
                                                                   : Admission::kStart;
}

Scheduler::Impl::Admission Scheduler::Impl::make_sequence(Pending& p, PrefixCache::Hit& hit,
                                                          bool on_grid,
                                                          std::unique_ptr<runtime::Sequence>& out) {
  while (true) {
    try {
      out = hit.session ? hit.session->fork() : new_sequence();
      if (hit.session) out->truncate(hit.reuse);
      return Admission::kStart;
    } catch (const kv::KvBudgetExceeded&) {
      out.reset();
    }
    // No room for a fork's sinks and ring: the job takes the entry itself
    // (a file of it stays in the disk tier where there is one).
    if (hit.session && (out = prefixes->take(hit.session))) {
      cache_changed = true;
      out->truncate(hit.reuse);
      return Admission::kStart;
    }
    // Room for the sequence's sinks and ring: cached prefixes go first.
    // (The hit's entry may be the one evicted: then start cold.) Each round
    // evicts one at least and reads none back from disk (that would take
    // the pages just freed), so this ends.
    if (make_room(estimate_bytes(0))) {
      if (on_grid && p.job.cache_prompt) {
        hit = prefixes->find(
            p.job.prompt, [&] { return new_sequence(); }, false);
      } else if (hit.session) {  // a whole prompt's entry, perhaps evicted just now
        const PrefixCache::WholeHit whole = prefixes->find_whole(p.job.prompt);
        hit = whole.session ? PrefixCache::Hit{.session = whole.session, .reuse = hit.reuse}
                            : PrefixCache::Hit{};
      }
      continue;
    }
    if (!active.empty()) return Admission::kBlocked;
    fail_pending(
        p, JobFinish::kError,
        str("the KV budget of ", options.budget_bytes, " bytes cannot hold a new sequence"), true);
    return Admission::kFailed;
  }
}

void Scheduler::Impl::admit() {
  // The queue in order; a job that does not fit the budget yet stays in
  // its place and later ones may pass it (queue[0, at) are the ones passed
  // in this round), until it has been passed max_overtakes times: then it
  // holds the rest back until it fits.
  // A finished reply taking in its last token (Active::closing) goes to the
  // prefix cache after this step: the next turn, often queued by now,
  // waits that one step to find it.
  if (std::any_of(active.begin(), active.end(), [](const auto& a) { return a->closing; })) return;
  size_t at = 0;
  while (int(active.size()) < options.parallel) {
    Pending p;
    // The job holds a free slot while it is neither queued nor active, so
    // submit() never counts it twice: a request arriving in between
    // (the prefix lookup, the sequence's pages) finds the queue as full as
    // it is. Given back unless the job starts (or, in place, if it waits).
    SlotClaim slot{*this};
    {
      const std::lock_guard<std::mutex> lock(mu);
      if (at >= queue.size()) return;
      p = std::move(queue[at]);
      queue.erase(queue.begin() + std::ptrdiff_t(at));
      counters.queued = int(queue.size());
      slot.claim();
    }
    if (options.on_admit) options.on_admit();
    if (p.stream->cancelled()) {
      fail_pending(p, JobFinish::kCancelled, {}, false);
      continue;
    }
    const int64_t prompt_len = int64_t(p.job.prompt.size());
    // A cold prefill of a prompt off the grid has no boundary a reuse could
    // start at.
    const bool on_grid = prefilled_on_grid(prompt_len);
    std::vector<float> whole_logits;  // a whole-prompt hit's: sampled at once
    PrefixCache::Hit hit = find_prefix(p, on_grid, whole_logits);
    // The budget: the job's pages (beyond what it shares) next to the
    // running jobs' estimates; cached prefixes give way (evicted on demand).
    const int64_t planned = std::min<int64_t>(
        options.context, p.job.max_tokens < 0 ? options.context : prompt_len + p.job.max_tokens);
    // Each further choice: its own pages from the prompt's last one on.
    const uint64_t choice_bytes = estimate_bytes(planned - prompt_len + options.kv.page_tokens);
    const uint64_t need =
        estimate_bytes(planned - hit.reuse) + uint64_t(p.job.choices - 1) * choice_bytes;
    std::unique_ptr<runtime::Sequence> sequence;
    Admission admission = check_budget(p, hit, need);
    if (admission == Admission::kStart) admission = make_sequence(p, hit, on_grid, sequence);
    if (admission == Admission::kFailed) continue;
    if (admission == Admission::kBlocked) {  // wait for running jobs to finish, in its place
      const bool holds = p.overtaken >= options.max_overtakes;
      const std::lock_guard<std::mutex> lock(mu);
      queue.insert(queue.begin() + std::ptrdiff_t(at), std::move(p));
      counters.queued = int(queue.size());
      slot.release_locked();
      if (holds) return;
      ++at;
      continue;
    }
    // It passes the waiting ones; one that has been passed enough holds
    // back the rest from now on.
    bool passed_enough = false;
    if (at > 0) {
      const std::lock_guard<std::mutex> lock(mu);
      for (size_t i = 0; i < at; ++i)
        passed_enough |= ++queue[i].overtaken >= options.max_overtakes;
    }
    Active& a = start(std::move(p), std::move(sequence), hit, need, on_grid);
    slot.keep();  // counted by `active` from now on
    if (!whole_logits.empty() && a.decoding()) {
      // The prompt is all there: its reply starts from the kept logits.
      const std::vector<Active*> more = fork_choices(a);
      sample_reply(a, whole_logits);
      for (Active* c : more) sample_reply(*c, whole_logits);
    }
    if (passed_enough) return;
  }
}

Active& Scheduler::Impl::start(Pending p, std::unique_ptr<runtime::Sequence> sequence,
                               const PrefixCache::Hit& hit, uint64_t need, bool on_grid) {
  auto a = std::make_unique<Active>(std::move(p), std::move(sequence), hit.reuse);
  a->reserved_bytes = need;
  if (prefixes && on_grid) a->checkpoints = checkpoints(a->pending.job, hit);
  if (hit.reuse > 0) {
    ++figures.prefix_hits;
    figures.prefix_tokens_reused += uint64_t(hit.reuse);
  }
  active.push_back(std::move(a));
  return *active.back();
}

// ---- the worker loop ----

void Scheduler::Impl::run() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu);
      const bool idle = active.empty();
      wake.wait(lock, [&] { return stopping || !queue.empty() || !active.empty(); });
      // Starting from idle: requests sent together reach the queue over a
      // few milliseconds (their HTTP threads parse them); admitting them in
      // one step lets their prompts share the first prefill steps instead
      // of the later ones prefilling next to the first ones' decoding.
      if (idle)
        for (int i = 0; i < kIdleSettleSteps && !stopping; ++i) {
          const size_t queued = queue.size();
          if (!wake.wait_for(lock, kIdleSettle, [&] { return stopping || queue.size() > queued; }))
            break;
        }
      // Draining: queued jobs are not started.
      if (!accepting)
        while (!queue.empty()) {
          Pending p = std::move(queue.front());
          queue.pop_front();
          lock.unlock();
          fail_pending(p, JobFinish::kCancelled, {}, false);
          lock.lock();
        }
      counters.queued = int(queue.size());
      const bool past_grace = cancel_at && std::chrono::steady_clock::now() >= *cancel_at;
      if (past_grace)
        for (auto& a : active) a->pending.stream->cancel();
      if (stopping && queue.empty() && active.empty()) break;
    }
    // Cancelled jobs (client gone, drain past its grace) free their pages.
    for (auto& a : active)
      if (a->pending.stream->cancelled()) finish(*a, JobFinish::kCancelled);
    std::erase_if(active, [](const auto& a) { return !a->sequence; });
    try {
      admit();
      note_free_slots();
      evict_before_spilling();
      step();
    } catch (const std::exception& e) {
      // A bug or a system failure outside the model (a filesystem error
      // escaping the cache dir, say): the running jobs end with it, the
      // server goes on.
      for (auto& a : active)
        if (a->sequence) finish(*a, JobFinish::kError, str("internal error: ", e.what()));
      active.clear();
    }
    publish();
  }
  if (prefixes) {
    prefixes->persist_all();
    prefixes->clear();
  }
  cache_changed = true;
  publish();
}

// ---- Scheduler ----

Scheduler::Scheduler(const model::Model& model, const tok::Tokenizer& tokenizer,
                     SchedulerOptions options)
    : options_(resolved(model, std::move(options))),
      impl_(std::make_unique<Impl>(model, tokenizer, options_)) {
  impl_->publish();
  impl_->thread = std::thread([this] { impl_->run(); });
}

Scheduler::~Scheduler() {
  drain(std::chrono::milliseconds(0));
}

std::shared_ptr<JobStream> Scheduler::submit(Job job) {
  std::vector<Job> jobs;
  jobs.push_back(std::move(job));
  return submit(std::move(jobs));
}

void Scheduler::check_job(Job& job) const {
  const int32_t n_vocab = impl_->tokenizer.n_vocab();
  using Problem = runtime::PromptVerdict::Problem;
  switch (const runtime::PromptVerdict v =
              runtime::check_prompt(job.prompt, {.n_vocab = n_vocab,
                                                 .context = options_.context,
                                                 .windowed = options_.kv.window > 0,
                                                 .room_after = 0});
          v.problem) {
    case Problem::kNone:
      break;
    case Problem::kEmpty:
      fail("prompt: no tokens");
    case Problem::kOutsideVocabulary:
      fail("prompt: token id ", job.prompt[v.index], " is outside the vocabulary (0..", n_vocab - 1,
           ")");
    case Problem::kTooLong:
      fail("prompt: ", job.prompt.size(), " tokens do not fit the context of ", options_.context,
           " tokens");
  }
  sample::validate(job.sampling);
  for (const std::string& s : job.stops)
    if (s.empty()) fail("stop: a stop string is empty");
  job.top_logprobs = std::min(job.top_logprobs, n_vocab);
  if (job.choices < 1) fail("choices: ", job.choices, " must be >= 1");
}

std::shared_ptr<JobStream> Scheduler::submit(std::vector<Job> jobs) {
  if (jobs.empty()) fail("submit: no job");
  int choices = 0;
  for (Job& job : jobs) {
    check_job(job);
    choices += job.choices;
  }
  auto stream = std::make_shared<JobStream>(choices);
  {
    const std::lock_guard<std::mutex> lock(impl_->mu);
    if (!impl_->accepting) throw NotAccepting("the server is shutting down");
    if (impl_->queue.size() + jobs.size() > size_t(options_.queue_capacity + impl_->free_slots))
      throw QueueFull(str("queue full: ", impl_->queue.size(), " requests waiting"));
    for (Job& job : jobs)
      impl_->queue.push_back(Pending{.job = std::move(job), .stream = stream, .since_submit = {}});
    impl_->counters.queued = int(impl_->queue.size());
  }
  impl_->wake.notify_one();
  return stream;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  {
    const std::lock_guard<std::mutex> lock(impl_->mu);
    s = impl_->counters;
    s.accepting = impl_->accepting;
  }
  // The background writer adds files while the worker may be idle.
  if (impl_->disk) {
    s.disk_prefixes = impl_->disk->files();
    s.disk_bytes = impl_->disk->bytes();
  }
  return s;
}

void Scheduler::drain(std::chrono::milliseconds grace) {
  std::call_once(impl_->drained, [&] {
    {
      const std::lock_guard<std::mutex> lock(impl_->mu);
      impl_->accepting = false;
      impl_->stopping = true;
      impl_->cancel_at = std::chrono::steady_clock::now() + grace;
    }
    impl_->wake.notify_one();
    if (impl_->thread.joinable()) impl_->thread.join();
  });
}

}  // namespace tkv::server
