// One step of the scheduler's batch: every decoding sequence's next token
// and prefill chunks of admitting ones through one Model::eval_batch, then
// sampling, streaming and finishing (scheduler.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <utility>

#include "common/error.h"
#include "common/vec_math.h"
#include "kv/spill_file.h"
#include "server/scheduler_impl.h"

namespace tkv::server {

namespace {

// The chosen token's logprob and the n most likely tokens under the model's
// distribution (log-softmax of the raw logits).
GeneratedToken with_logprobs(int32_t id, std::span<const float> logits, int n) {
  GeneratedToken t{.token = id, .logprob = 0, .top = {}};
  if (n < 0) return t;
  const double lse = log_sum_exp(logits.data(), int64_t(logits.size()));
  t.logprob = float(double(logits[size_t(id)]) - lse);
  if (n == 0) return t;
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const auto by_logit = [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] ||
           (logits[size_t(a)] == logits[size_t(b)] && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + n, order.end(), by_logit);
  for (int i = 0; i < n; ++i)
    t.top.push_back({order[size_t(i)], float(double(logits[size_t(order[size_t(i)])]) - lse)});
  return t;
}

// Whether the pool's disk tier failed an item: kSpillError, or a
// kv::KvSpillError that its page allocation met (reported as kInvalid).
bool disk_tier_failed(const model::ItemStatus& s) {
  if (s.code == model::ItemStatus::Code::kSpillError) return true;
  if (!s.error) return false;
  try {
    std::rethrow_exception(s.error);
  } catch (const kv::KvSpillError&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

void Scheduler::Impl::finish(Active& a, JobFinish reason, std::string error, bool budget) {
  // The job ended already: its client going away changes nothing; an
  // error loses only the kept sequence.
  if (a.closing) {
    if (reason != JobFinish::kCancelled) a.sequence.reset();
    return;
  }
  Pending& p = a.pending;
  runtime::Reply& reply = a.sequence->reply();
  if (reason == JobFinish::kStop || reason == JobFinish::kLength) a.out.text += reply.flush();
  if (!a.out.text.empty() || !a.out.tokens.empty()) {
    a.out.kind = Event::Kind::kText;
    a.out.choice = p.job.first_choice + a.choice;
    p.stream->push(std::exchange(a.out, {}));
  }
  // Choices not forked yet (the job ended before its prompt was in) end
  // with it.
  if (!a.forked && a.choice == 0 && p.job.choices > 1)
    fail_pending(p, reason, error, budget, /*from_choice=*/1);
  Event done;
  done.choice = p.job.first_choice + a.choice;
  done.kind = Event::Kind::kDone;
  done.finish = reason;
  done.error = std::move(error);
  done.budget_error = budget;
  done.stop_string = reply.stop_string();
  done.prompt_tokens = int64_t(p.job.prompt.size());
  done.cached_tokens = a.cached_tokens;
  done.completion_tokens = a.generated();
  done.timings.queued_seconds = a.queued_seconds;
  done.timings.first_token_seconds = a.first_token_seconds;
  done.timings.total_seconds = p.since_submit.seconds();

  if (a.choice == 0) figures.prompt_tokens += uint64_t(p.job.prompt.size());
  figures.completion_tokens += uint64_t(a.generated());
  ++figures.jobs_finished;
  // Its checkpoints are in the prefix cache; the finished sequence itself is
  // not reusable exactly (prefix_cache.h): it frees its pages, or is kept
  // when reuse need not be exact. A reply's last token (its end-of-turn
  // token, or the one at the limit) goes in first (one more step, the
  // client told now), so that the kept sequence holds the whole
  // conversation the next turn renders.
  const bool keep =
      (reason == JobFinish::kStop || reason == JobFinish::kLength) && keeps_finished(a);
  if (keep && a.end_token >= 0 && a.sequence->room() > 0) {
    const int32_t last[1] = {a.end_token};
    a.sequence->queue(last);
    a.closing = true;
  } else {
    if (keep) keep_finished(a);
    a.sequence.reset();
  }
  // The figures, and the free places submit() counts, include this job's
  // end before its consumer hears it: a client that sends its next request
  // at once finds the place free.
  publish();
  p.stream->push(std::move(done));
  if (options.on_finish) options.on_finish();
}

bool Scheduler::Impl::keeps_finished(const Active& a) const {
  // A reply is kept where a checkpoint of it can serve the prompts sharing
  // part of it (truncatable; a recurrent state is at its end only), once
  // per job (its first choice).
  return prefixes && !prefixes->rule().exact && prefixes->rule().truncatable && a.choice == 0 &&
         a.pending.job.cache_prompt;
}

void Scheduler::Impl::keep_finished(Active& a) {
  if (!keeps_finished(a) || a.sequence->tokens().size() <= a.pending.job.prompt.size()) return;
  prefixes->insert(std::move(a.sequence));
  cache_changed = true;
}

void Scheduler::Impl::take_checkpoint(Active& a) {
  const int64_t at = int64_t(a.sequence->tokens().size());
  std::vector<int64_t>& points = a.checkpoints;
  while (!points.empty() && points.front() < at) points.erase(points.begin());
  if (points.empty() || points.front() != at) return;
  points.erase(points.begin());
  // Older prefixes give way to it (it is the newest), once.
  for (bool retry = true;; retry = false) {
    try {
      prefixes->insert(a.sequence->fork());
      cache_changed = true;
      return;
    } catch (const kv::KvBudgetExceeded&) {
      if (!retry || !make_room(estimate_bytes(0))) return;
    } catch (const kv::KvOutOfMemory&) {
      return;
    }
  }
}

std::vector<Active*> Scheduler::Impl::fork_choices(Active& a) {
  const Job& job = a.pending.job;
  if (a.forked || job.choices <= 1) return {};
  a.forked = true;
  // Each further choice's pages from the prompt's last one on (admission
  // reserved them with the first choice's).
  const int64_t room = job.max_tokens < 0 ? options.context : job.max_tokens;
  const uint64_t choice_bytes = std::min(a.reserved_bytes / uint64_t(job.choices),
                                         estimate_bytes(room + options.kv.page_tokens));
  std::vector<Active*> made;
  for (int c = 1; c < job.choices; ++c) {
    std::unique_ptr<runtime::Sequence> seq;
    for (bool retry = true; !seq; retry = false) {
      try {
        seq = a.sequence->fork();
      } catch (const kv::KvBudgetExceeded&) {
        if (!retry || !make_room(estimate_bytes(0))) break;
      }
    }
    if (!seq) {
      fail_pending(a.pending, JobFinish::kError,
                   str("KV budget exhausted: no room to fork choice ", c, " of ", job.choices),
                   true, c);
      break;
    }
    auto sibling = std::make_unique<Active>(a, std::move(seq), c);
    sibling->reserved_bytes = choice_bytes;
    a.reserved_bytes -= choice_bytes;
    made.push_back(sibling.get());
    active.push_back(std::move(sibling));
  }
  return made;
}

void Scheduler::Impl::keep_whole_prompt(Active& a, std::span<const float> logits) {
  if (!prefixes || prefilled_on_grid(int64_t(a.pending.job.prompt.size()))) return;
  // Older prefixes give way to it (it is the newest), once.
  for (bool retry = true;; retry = false) {
    try {
      prefixes->insert_whole(a.sequence->fork(), std::vector<float>(logits.begin(), logits.end()));
      cache_changed = true;
      return;
    } catch (const kv::KvBudgetExceeded&) {
      if (!retry || !make_room(estimate_bytes(0))) return;
    } catch (const kv::KvOutOfMemory&) {
      return;
    }
  }
}

bool Scheduler::Impl::admitted_before(const Active& x, const Active& y) const {
  for (const auto& a : active) {
    if (a.get() == &x) return true;
    if (a.get() == &y) return false;
  }
  return false;
}

Scheduler::Impl::Batch Scheduler::Impl::plan_step() {
  const int64_t grid = options.prefill_chunk;
  Batch batch;
  // Decoding sequences first: each its one queued token.
  for (auto& a : active)
    if (a->decoding()) batch.add(*a, a->sequence->next_item(1));
  batch.info.decode_tokens = int(batch.items.size());
  // Then prefill chunks in admission order, each the next cell of the grid
  // [k*C, (k+1)*C) (cut by the prompt's end), or a short prompt's whole
  // rest (whole_prompt_tokens). While sequences decode, the
  // step's prefill is capped (their latency): whole chunks within one
  // chunk's tokens (a short prompt's one chunk, when larger, in layer parts
  // within that work), or (prefill_tokens_per_step > 0) the work of that many
  // tokens through every layer at depth 0, a chunk over what is left
  // running as many of its layers as fit (the step's first one at least
  // one layer) and going on next step. Else each admitting sequence's
  // chunk runs whole, or what is left of it (nobody waits on the step but
  // the prompts themselves), short prompts' chunks up to
  // kWholePromptRowsPerStep rows.
  const int n_layers = model.config().n_layers;
  const bool by_work = options.prefill_tokens_per_step > 0;
  const double full_budget = double(by_work ? options.prefill_tokens_per_step : grid) * n_layers;
  double budget =
      batch.info.decode_tokens == 0 ? std::numeric_limits<double>::infinity() : full_budget;
  StepInfo& info = batch.info;
  bool first_prefill = true;
  for (auto& a : active) {
    if (a->decoding()) continue;
    runtime::Sequence& seq = *a->sequence;
    const int64_t at = int64_t(seq.tokens().size());
    const int64_t size = int64_t(a->pending.job.prompt.size());
    // A short prompt is one chunk to its end; a longer one the next grid cell.
    const bool whole_prompt = !prefilled_on_grid(size);
    int64_t end = whole_prompt ? size : std::min<int64_t>(size, (at / grid + 1) * grid);
    // A checkpoint off the grid (reuse that need not be exact) cuts its cell.
    for (int64_t point : a->checkpoints)
      if (point > at) {
        end = std::min(end, point);
        break;
      }
    const int64_t n = end - at;
    if (whole_prompt && n > grid && info.prefill_tokens > 0 &&
        info.prefill_tokens + n > kWholePromptRowsPerStep)
      break;  // the step's rows are enough; the rest wait their turn
    const int begin = seq.chunk_layers_done();
    if (begin == 0) take_checkpoint(*a);
    // The chunk's work per layer in depth-0 tokens: its rows through the
    // matrices (and attention among themselves) plus its queries against
    // the keys before them.
    const double per_layer = by_work ? double(n) * (1 + attention_per_key * double(at)) : double(n);
    int layers = n_layers - begin;
    if (per_layer * layers > budget) {
      // By default grid chunks run whole (the rest wait their turn); a
      // whole-prompt chunk over a grid chunk's work runs in layer parts.
      if (!by_work && n <= grid) break;
      // Parts of equal size: the fewest steps a full budget allows, their
      // layers shared out evenly (a 16-token chunk over a 12-token budget
      // runs 8 + 8 layers, not 12 + 4: the same first token, and no step
      // carries more than it must).
      const int parts = std::max(1, int(std::ceil(per_layer * layers / full_budget - 1e-9)));
      // (The step's first chunk may take a layer over the budget: what is
      // left is then below zero, and nothing more joins.)
      layers = std::min((layers + parts - 1) / parts, int(std::max(0.0, budget) / per_layer));
      if (layers == 0 && first_prefill) layers = 1;
      if (layers == 0) break;  // the rest wait their turn (the order is kept)
    }
    budget -= per_layer * layers;
    const int stop = begin + layers;
    batch.add(*a, seq.next_item(n, stop));
    first_prefill = false;
    ++info.prefill_chunks;
    info.prefill_tokens += int(n);
    info.prefill_token_layers += n * layers;
    info.prefill_work += per_layer * layers;
    info.split_chunks += !(begin == 0 && stop == n_layers);
  }
  return batch;
}

void Scheduler::Impl::sample_reply(Active& a, std::span<const float> logits) {
  runtime::Sequence& seq = *a.sequence;
  const Job& job = a.pending.job;
  const bool first = a.generated() == 0;
  runtime::Reply::Step step;
  try {
    step = seq.sample_next(logits, [&](int32_t id, const std::string& text) {
      a.out.tokens.push_back(with_logprobs(id, logits, job.top_logprobs));
      a.out.text += text;
      return true;
    });
  } catch (const Error& e) {
    finish(a, JobFinish::kError, e.what());
    return;
  }
  if (first && step.token >= 0) a.first_token_seconds = a.pending.since_submit.seconds();
  if (step.stop) {
    // An end-of-generation token or a stop string is a stop; the limit and
    // a full context are a length (OpenAI's finish reasons).
    const bool stopped = *step.stop == runtime::StopReason::kEndOfText ||
                         *step.stop == runtime::StopReason::kStopString;
    // The reply's last token, sampled and not fed: its end-of-turn token, or
    // the token that reached the limit (the next turn renders both; a stop
    // string's text is cut from the reply, so its token is not kept).
    if (*step.stop != runtime::StopReason::kStopString) a.end_token = step.token;
    finish(a, stopped ? JobFinish::kStop : JobFinish::kLength);
    return;
  }
  if (!a.out.text.empty()) {
    a.out.kind = Event::Kind::kText;
    a.out.choice = job.first_choice + a.choice;
    a.pending.stream->push(std::exchange(a.out, {}));
  }
  const int32_t next[1] = {step.token};
  seq.queue(next);
}

bool Scheduler::Impl::step() {
  // Jobs that ended before the step (a reply sampled at admission from a
  // whole prompt's kept logits may end at once) are gone from the batch.
  std::erase_if(active, [](const auto& a) { return !a->sequence; });
  if (active.empty()) return false;
  const Batch batch = plan_step();
  if (batch.items.empty()) return false;
  if (options.on_step) options.on_step(batch.info);

  std::vector<model::ItemStatus> status;
  try {
    status = model.eval_batch(ctx, batch.items, threads);
  } catch (const Error& e) {
    // Non-finite activations: the batch's sequences are unusable.
    for (Active* a : batch.owner) finish(*a, JobFinish::kError, e.what());
    std::erase_if(active, [](const auto& a) { return !a->sequence; });
    return true;
  }

  std::vector<OutOfPages> out_of_pages;
  for (size_t b = 0; b < batch.items.size(); ++b) {
    Active& a = *batch.owner[b];
    const model::ItemStatus& s = status[b];
    if (!s.ok()) {
      item_failed(a, batch.items[b], s, out_of_pages);
      continue;
    }
    // A prompt chunk that ran through the last layer is prefill work done
    // (a chunk in layer parts counts once, at its last part).
    if (!a.decoding() && a.sequence->chunk_layers_done() == 0)
      figures.prompt_tokens_prefilled += batch.items[b].tokens.size();
    // A part of a chunk, or a chunk before the prompt's last: nothing to
    // sample yet.
    if (!a.sequence->accept(batch.items[b], s)) continue;
    if (a.closing) {  // the reply's last token is in: the whole conversation is kept
      keep_finished(a);
      a.sequence.reset();
      continue;
    }
    if (a.generated() == 0 && !a.forked) {
      keep_whole_prompt(a, ctx.logits(b));
      take_checkpoint(a);  // the prompt's end, when a checkpoint goes there
    }
    const std::vector<Active*> more = fork_choices(a);
    sample_reply(a, ctx.logits(b));
    for (Active* c : more) sample_reply(*c, ctx.logits(b));
  }
  // The youngest of the jobs that found no pages fails: its pages let the
  // older ones go on next step (several failing in one step would all fail
  // together otherwise, though one alone was in the way).
  if (!out_of_pages.empty()) {
    const auto youngest = std::max_element(
        out_of_pages.begin(), out_of_pages.end(),
        [&](const OutOfPages& x, const OutOfPages& y) { return admitted_before(*x.job, *y.job); });
    finish(*youngest->job, JobFinish::kError, str("KV budget exhausted: ", youngest->message),
           true);
  }
  std::erase_if(active, [](const auto& a) { return !a->sequence; });
  return true;
}

void Scheduler::Impl::item_failed(Active& a, const model::BatchItem& item,
                                  const model::ItemStatus& s,
                                  std::vector<OutOfPages>& out_of_pages) {
  const bool budget = s.code == model::ItemStatus::Code::kBudgetExceeded ||
                      s.code == model::ItemStatus::Code::kOutOfMemory;
  // Out of pages: cached prefixes give way and the item runs again next
  // step (it changed nothing); with nothing left to evict, one job of
  // those that ran out fails (step) and the others run again.
  if (budget && make_room(estimate_bytes(int64_t(item.tokens.size())))) return;
  if (budget) {
    out_of_pages.push_back({&a, s.message});
    return;
  }
  // The disk tier failed this item (part-way, kSpillError: its sequence
  // was cleared; or moving pages out for its allocation): the job ends,
  // the others go on.
  finish(a, JobFinish::kError,
         disk_tier_failed(s) ? str("the KV cache's disk tier failed: ", s.message) : s.message);
}

}  // namespace tkv::server
