#include "runtime/sequence.h"

#include <limits>
#include <utility>

#include "common/error.h"

namespace tkv::runtime {

namespace {

// Under a window policy the cache keeps only sinks + the newest W tokens, so
// memory is bounded whatever the sequence length, and positions may run past
// -c (docs/ARCHITECTURE.md): the shape's limit is lifted then. Nothing in the
// cache is sized by max_tokens.
kv::KvShape shape_for(const model::Model& model, int ctx, const kv::KvConfig& kv) {
  kv::KvShape shape = model.kv_shape(ctx);
  shape.max_tokens = kv.window > 0 ? std::numeric_limits<int32_t>::max() : ctx;
  return shape;
}

}  // namespace

Sequence::Sequence(const model::Model& model, const tok::Tokenizer& tokenizer, int ctx,
                   const kv::KvConfig& kv, int threads, int ubatch)
    : model_(model),
      tokenizer_(tokenizer),
      cache_(std::make_unique<kv::KvCache>(shape_for(model, ctx, kv), kv)),
      own_threads_(std::make_unique<ThreadPool>(threads)),
      threads_(own_threads_.get()),
      ubatch_(ubatch),
      context_size_(ctx) {}

Sequence::Sequence(const model::Model& model, const tok::Tokenizer& tokenizer, int ctx,
                   const kv::KvConfig& kv, std::shared_ptr<kv::PagePool> pages, ThreadPool& threads,
                   int ubatch)
    : model_(model),
      tokenizer_(tokenizer),
      cache_(std::make_unique<kv::KvCache>(shape_for(model, ctx, kv), kv, std::move(pages))),
      threads_(&threads),
      ubatch_(ubatch),
      context_size_(ctx) {}

Sequence::Sequence(const Sequence& from, std::unique_ptr<kv::KvCache> cache)
    : model_(from.model_),
      tokenizer_(from.tokenizer_),
      cache_(std::move(cache)),
      threads_(from.threads_),
      ubatch_(from.ubatch_),
      observer_(from.observer_),
      tokens_(from.tokens_),
      context_size_(from.context_size_) {}

Sequence::~Sequence() = default;

std::unique_ptr<Sequence> Sequence::fork() const {
  // A chunk half-way through its layers is not a state anyone can continue
  // from twice.
  TKV_CHECK(parts_.layers_done() == 0);
  // The fork computes on this sequence's threads, whoever owns them: forks
  // of a sequence with its own pool must not outlive it.
  return std::unique_ptr<Sequence>(new Sequence(*this, cache_->fork()));
}

void Sequence::truncate(int64_t n) {
  if (n < 0 || n > int64_t(tokens_.size()))
    fail("truncate: ", n, " is outside [0, ", tokens_.size(), "]");
  TKV_CHECK(parts_.layers_done() == 0);
  // A hybrid model's cache goes back to its nearest snapshot; the tokens
  // from there to n are fed again.
  const int64_t at = cache_->restore_point(n);
  const std::vector<int32_t> again(tokens_.begin() + at, tokens_.begin() + n);
  cache_->truncate(at);
  tokens_.resize(size_t(at));
  logits_.clear();
  queue_.clear();
  if (!again.empty()) {
    feed(again);
    logits_.clear();
  }
}

int64_t Sequence::room() const {
  return cache_->shape().max_tokens - cache_->n_tokens();
}

std::string Sequence::no_room_for(int64_t n) const {
  if (n <= room()) return {};
  return str("context full: ", cache_->n_tokens(), " + ", n, " tokens > ", context_size_,
             " (the context size)");
}

void Sequence::feed(std::span<const int32_t> tokens) {
  if (tokens.empty()) return;
  TKV_CHECK(parts_.layers_done() == 0);
  if (const std::string why = no_room_for(int64_t(tokens.size())); !why.empty()) fail(why);
  model::EvalOptions options{.ubatch = ubatch_, .all_logits = false, .on_chunk = {}};
  // Decode steps (one token) are never observed; a prompt is.
  std::function<void(int64_t)> on_chunk;
  if (observer_ && tokens.size() > 1) on_chunk = observer_(int64_t(tokens.size()));
  // A prompt's start and end are where a conversation is cut back to (an
  // edited message, a regenerated reply): recurrent layers keep their state
  // there (KvCache::snapshot; no-op for other models). Not per decode token.
  const bool prompt = tokens.size() > 1;
  if (prompt) cache_->snapshot();
  // Within a long prompt, one past each multiple of the spacing (the
  // cache keeps them spread out), so that a cut inside it feeds again at
  // most about that many tokens.
  const int64_t spacing = cache_->config().state_snapshot_spacing;
  int64_t marks = spacing > 0 ? cache_->n_tokens() / spacing : 0;
  if (on_chunk || (prompt && spacing > 0))
    options.on_chunk = [&](int64_t done, int64_t) {
      if (on_chunk) on_chunk(done);
      if (!prompt || spacing <= 0 || cache_->n_tokens() / spacing == marks) return;
      marks = cache_->n_tokens() / spacing;
      cache_->snapshot();
    };
  try {
    model_.eval(
        *cache_, tokens, *threads_,
        [this](int64_t, std::span<const float> logits) {
          logits_.assign(logits.begin(), logits.end());
        },
        options);
  } catch (...) {
    // The history follows the cache: chunks before a failed one stay in it;
    // a disk-tier failure part-way through a chunk cleared it.
    const int64_t held = cache_->n_tokens();
    if (held < int64_t(tokens_.size()))
      tokens_.clear();
    else
      tokens_.insert(tokens_.end(), tokens.begin(),
                     tokens.begin() + (held - int64_t(tokens_.size())));
    logits_.clear();
    throw;
  }
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  if (prompt) cache_->snapshot();
}

void Sequence::queue(std::span<const int32_t> tokens) {
  queue_.insert(queue_.end(), tokens.begin(), tokens.end());
}

model::BatchItem Sequence::next_item(int64_t n, int layer_stop) {
  TKV_CHECK(n >= 1 && n <= int64_t(queue_.size()));
  const int n_layers = model_.config().n_layers;
  const int stop = layer_stop > 0 && layer_stop < n_layers ? layer_stop : n_layers;
  TKV_CHECK(stop > parts_.layers_done());
  const bool in_parts = parts_.layers_done() > 0 || stop < n_layers;
  parts_.run_until(stop == n_layers ? 0 : stop);
  const bool last = stop == n_layers && n == int64_t(queue_.size());
  return {.sequence = cache_.get(),
          .tokens = std::span<const int32_t>(queue_).first(size_t(n)),
          .logits = last ? model::Logits::kLast : model::Logits::kNone,
          .parts = in_parts ? &parts_ : nullptr};
}

bool Sequence::accept(const model::BatchItem& item, const model::ItemStatus& status,
                      std::span<const float> logits) {
  TKV_CHECK(item.sequence == cache_.get());
  if (!status.ok()) {
    if (status.code == model::ItemStatus::Code::kSpillError) clear();
    return false;
  }
  if (parts_.layers_done() > 0) return false;  // a part that stopped before the last layer
  const size_t n = item.tokens.size();
  TKV_CHECK(n <= queue_.size() && int64_t(tokens_.size() + n) == cache_->n_tokens());
  tokens_.insert(tokens_.end(), queue_.begin(), queue_.begin() + std::ptrdiff_t(n));
  queue_.erase(queue_.begin(), queue_.begin() + std::ptrdiff_t(n));
  if (item.logits != model::Logits::kLast) return false;
  logits_.assign(logits.begin(), logits.end());
  return true;
}

void Sequence::set_sampler(const sample::SamplerConfig& config) {
  sampler_.emplace(config);
}

sample::Sampler& Sequence::sampler() {
  TKV_CHECK(sampler_.has_value());
  return *sampler_;
}

Reply& Sequence::start_reply(ReplyLimits limits, const ReplyText& text) {
  reply_ = std::make_unique<Reply>(tokenizer_, std::move(limits), text);
  return *reply_;
}

Reply& Sequence::reply() {
  TKV_CHECK(reply_ != nullptr);
  return *reply_;
}

Reply::Step Sequence::sample_next(std::span<const float> logits,
                                  const std::function<bool(int32_t, const std::string&)>& consume) {
  return reply().step(sampler(), logits, room(), consume);
}

void Sequence::clear() {
  cache_->clear();
  tokens_.clear();
  logits_.clear();
  queue_.clear();
  parts_.reset();
}

void Sequence::restore_tokens(std::vector<int32_t> tokens) {
  TKV_CHECK(int64_t(tokens.size()) == cache_->n_tokens());
  tokens_ = std::move(tokens);
  logits_.clear();
  queue_.clear();
}

}  // namespace tkv::runtime
