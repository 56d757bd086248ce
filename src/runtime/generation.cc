#include "runtime/generation.h"

#include <algorithm>
#include <utility>

#include "common/error.h"
#include "common/timer.h"
#include "runtime/text_stream.h"

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

InferenceSession::InferenceSession(const model::Model& model, const tok::Tokenizer& tokenizer,
                                   int ctx, const kv::KvConfig& kv, int threads, int ubatch)
    : model_(model),
      tokenizer_(tokenizer),
      cache_(std::make_unique<kv::KvCache>(shape_for(model, ctx, kv), kv)),
      own_threads_(std::make_unique<ThreadPool>(threads)),
      threads_(own_threads_.get()),
      ubatch_(ubatch),
      context_size_(ctx) {}

InferenceSession::InferenceSession(const model::Model& model, const tok::Tokenizer& tokenizer,
                                   int ctx, const kv::KvConfig& kv,
                                   std::shared_ptr<kv::PagePool> pages, ThreadPool& threads,
                                   int ubatch)
    : model_(model),
      tokenizer_(tokenizer),
      cache_(std::make_unique<kv::KvCache>(shape_for(model, ctx, kv), kv, std::move(pages))),
      threads_(&threads),
      ubatch_(ubatch),
      context_size_(ctx) {}

InferenceSession::InferenceSession(const InferenceSession& from, std::unique_ptr<kv::KvCache> cache)
    : model_(from.model_),
      tokenizer_(from.tokenizer_),
      cache_(std::move(cache)),
      threads_(from.threads_),
      ubatch_(from.ubatch_),
      observer_(from.observer_),
      tokens_(from.tokens_),
      context_size_(from.context_size_) {}

std::unique_ptr<InferenceSession> InferenceSession::fork() const {
  // The fork computes on this session's threads, whoever owns them: forks
  // of a session with its own pool must not outlive it.
  return std::unique_ptr<InferenceSession>(new InferenceSession(*this, cache_->fork()));
}

void InferenceSession::truncate(int64_t n) {
  if (n < 0 || n > int64_t(tokens_.size()))
    fail("truncate: ", n, " is outside [0, ", tokens_.size(), "]");
  cache_->truncate(n);
  tokens_.resize(size_t(n));
  logits_.clear();
}

int64_t InferenceSession::room() const {
  return cache_->shape().max_tokens - cache_->n_tokens();
}

void InferenceSession::feed(std::span<const int32_t> tokens) {
  if (tokens.empty()) return;
  if (int64_t(tokens.size()) > room())
    fail("context full: ", cache_->n_tokens(), " + ", tokens.size(), " tokens > ", context_size_,
         " (the context size)");
  model::EvalOptions options{.ubatch = ubatch_, .all_logits = false, .on_chunk = {}};
  // Decode steps (one token) are never observed; a prompt is.
  std::function<void(int64_t)> on_chunk;
  if (observer_ && tokens.size() > 1) on_chunk = observer_(int64_t(tokens.size()));
  if (on_chunk) options.on_chunk = [&](int64_t done, int64_t) { on_chunk(done); };
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
}

void InferenceSession::record_fed(std::span<const int32_t> tokens,
                                  std::span<const float> last_logits) {
  TKV_CHECK(int64_t(tokens_.size() + tokens.size()) == cache_->n_tokens());
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  if (!last_logits.empty()) logits_.assign(last_logits.begin(), last_logits.end());
}

void InferenceSession::clear() {
  cache_->clear();
  tokens_.clear();
  logits_.clear();
}

void InferenceSession::restore_tokens(std::vector<int32_t> tokens) {
  TKV_CHECK(int64_t(tokens.size()) == cache_->n_tokens());
  tokens_ = std::move(tokens);
  logits_.clear();
}

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kLength:
      return "length";
    case StopReason::kEndOfText:
      return "end of text";
    case StopReason::kStopString:
      return "stop string";
    case StopReason::kContextFull:
      return "context full";
    case StopReason::kInterrupted:
      return "interrupted";
    case StopReason::kCancelled:
      return "cancelled";
  }
  return "?";
}

GenerateResult generate(InferenceSession& session, sample::Sampler& sampler,
                        const GenerateOptions& options,
                        const std::function<bool(int32_t token)>& on_token) {
  TKV_CHECK(!session.logits().empty());
  const tok::Tokenizer& tokenizer = session.tokenizer();
  GenerateResult result;
  const Stopwatch total;
  while (true) {
    if (options.interrupt && options.interrupt->load()) {
      result.reason = StopReason::kInterrupted;
      break;
    }
    if (options.max_tokens >= 0 && result.n_generated >= options.max_tokens) {
      result.reason = StopReason::kLength;
      break;
    }
    const auto& logits = session.logits();
    const int32_t id = sampler.sample(logits.data(), int(logits.size()));
    sampler.accept(id);
    if (options.stop_at_eog &&
        (tokenizer.is_eog(id) || std::find(options.stop_tokens.begin(), options.stop_tokens.end(),
                                           id) != options.stop_tokens.end())) {
      result.reason = StopReason::kEndOfText;
      break;
    }
    ++result.n_generated;
    const bool keep_going = on_token(id);
    if (result.n_generated == 1) result.first_token_seconds = total.seconds();
    if (!keep_going) {
      result.reason = StopReason::kStopString;
      break;
    }
    // The last token of a length-limited run need not be fed: nothing will
    // be sampled after it.
    if (options.max_tokens >= 0 && result.n_generated >= options.max_tokens) {
      result.reason = StopReason::kLength;
      break;
    }
    if (session.room() < 1) {
      result.reason = StopReason::kContextFull;
      break;
    }
    const Stopwatch step;
    const int32_t one[1] = {id};
    session.feed(one);
    result.decode_seconds += step.seconds();
    ++result.n_decoded;
  }
  return result;
}

TextGenerateResult generate_text(InferenceSession& session, sample::Sampler& sampler,
                                 const GenerateOptions& options,
                                 const std::vector<std::string>& stops, tok::StreamDecoder& decoder,
                                 const std::function<bool(std::string_view text)>& on_text) {
  TextStream stream(decoder, stops);
  bool cancelled = false;
  TextGenerateResult out;
  out.generation = generate(session, sampler, options, [&](int32_t id) {
    const std::string text = stream.push(id);
    if (!text.empty() && !on_text(text)) cancelled = true;
    return !stream.stopped() && !cancelled;
  });
  if (cancelled && !stream.stopped()) {
    out.generation.reason = StopReason::kCancelled;
    return out;
  }
  // The rest is handed out even if on_text cancels now: nothing more is generated.
  if (const std::string text = stream.flush(); !text.empty()) on_text(text);
  out.stop_string = stream.stop_string();
  return out;
}

}  // namespace tkv::runtime
