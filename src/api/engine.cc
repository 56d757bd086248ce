// The C++ API (include/turbokv/turbokv.hpp) over the runtime: an engine is a
// model, a tokenizer, one shared page pool and one thread pool; a sequence
// is a runtime::Sequence on them. Internal errors become the API's
// own exception types here, so no internal type reaches a caller.
#include <mutex>
#include <new>
#include <utility>

#include "common/error.h"
#include "common/thread_pool.h"
#include "kv/kv_config.h"
#include "kv/page_pool.h"
#include "model/context.h"
#include "model/model.h"
#include "runtime/batch.h"
#include "runtime/generation.h"
#include "runtime/session_state.h"
#include "sample/sampler.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "turbokv/turbokv.hpp"

#ifndef TURBOKV_VERSION
#define TURBOKV_VERSION "unknown"
#endif

namespace turbokv {

namespace {

// Runs `fn`, turning internal exceptions into the API's.
template <class F>
decltype(auto) translated(F&& fn) {
  try {
    return fn();
  } catch (const tkv::kv::KvBudgetExceeded& e) {
    throw BudgetExceeded(e.what());
  } catch (const tkv::kv::KvOutOfMemory& e) {
    throw OutOfMemory(e.what());
  } catch (const std::bad_alloc&) {
    throw OutOfMemory("out of memory");
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
}

tkv::sample::SamplerConfig sampler_config(const SamplingParams& p) {
  tkv::sample::SamplerConfig c;
  c.temperature = p.temperature;
  c.top_k = p.top_k;
  c.top_p = p.top_p;
  c.min_p = p.min_p;
  c.repeat_penalty = p.repeat_penalty;
  c.repeat_last_n = p.repeat_last_n;
  c.seed = p.seed;
  return c;
}

}  // namespace

struct Engine::Impl {
  std::unique_ptr<tkv::model::Model> model;
  std::unique_ptr<tkv::tok::Tokenizer> tokenizer;
  tkv::kv::KvConfig kv;
  int context = 0;
  int ubatch = 512;
  std::shared_ptr<tkv::kv::PagePool> pages;
  std::unique_ptr<tkv::ThreadPool> threads;
  std::mutex compute;  // one eval at a time: the thread pool is not reentrant
  tkv::model::ExecutionContext batch_context;  // eval_batch's activations (under `compute`)
};

struct Sequence::Impl {
  std::shared_ptr<Engine::Impl> engine;
  std::unique_ptr<tkv::runtime::Sequence> session;
};

Engine::Engine(const std::string& model_path, const EngineOptions& options) {
  translated([&] {
    auto impl = std::make_shared<Impl>();
    if (options.threads < 0) throw Error("threads: " + std::to_string(options.threads) + " < 0");
    if (options.ubatch < 1) throw Error("ubatch: " + std::to_string(options.ubatch) + " < 1");
    if (options.context < 0) throw Error("context: " + std::to_string(options.context) + " < 0");
    if (!tkv::kv::parse_kv_shorthand(options.kv_cache_type, impl->kv.k, impl->kv.v))
      throw Error("unknown KV cache type '" + options.kv_cache_type + "' (e.g. f16, q8_0, k4v2)");
    impl->model = tkv::model::Model::load(model_path);
    impl->tokenizer =
        std::make_unique<tkv::tok::Tokenizer>(tkv::tok::Tokenizer::from_gguf(impl->model->gguf()));
    const int trained = impl->model->kv_shape(0).max_tokens;
    impl->context = options.context > 0 ? options.context : trained;
    impl->ubatch = options.ubatch;
    impl->pages = std::make_shared<tkv::kv::PagePool>(options.kv_budget_bytes);
    impl->threads = std::make_unique<tkv::ThreadPool>(
        options.threads > 0 ? options.threads : tkv::physical_core_count());
    impl_ = std::move(impl);
  });
}

Engine::~Engine() = default;

std::vector<int32_t> Engine::tokenize(std::string_view text, bool add_bos,
                                      bool parse_special) const {
  return translated([&] {
    const tkv::tok::Tokenizer& t = *impl_->tokenizer;
    std::vector<int32_t> ids;
    if (add_bos && t.add_bos() && t.bos() != tkv::tok::kNoToken) ids.push_back(t.bos());
    for (int32_t id : t.encode(text, /*add_special=*/false, parse_special)) ids.push_back(id);
    return ids;
  });
}

std::string Engine::detokenize(std::span<const int32_t> tokens) const {
  return translated([&] {
    const int32_t n_vocab = impl_->tokenizer->n_vocab();
    tkv::tok::StreamDecoder decoder(*impl_->tokenizer, tkv::tok::StreamDecoder::Start::kTextStart);
    std::string text;
    for (int32_t id : tokens) {
      if (id < 0 || id >= n_vocab) throw Error("token id " + std::to_string(id) + " out of range");
      text += decoder.push(id);
    }
    return text + decoder.flush();
  });
}

int32_t Engine::n_vocab() const {
  return impl_->tokenizer->n_vocab();
}

int Engine::context_size() const {
  return impl_->context;
}

bool Engine::is_end_of_generation(int32_t token) const {
  return impl_->tokenizer->is_eog(token);
}

PoolStats Engine::pool_stats() const {
  const tkv::kv::PoolStats s = impl_->pages->stats();
  return {.bytes_in_use = s.bytes_in_use, .budget = s.budget, .shared_bytes = s.shared_bytes};
}

Sequence Engine::new_sequence() {
  return translated([&] {
    auto seq = std::make_unique<Sequence::Impl>();
    seq->engine = impl_;
    seq->session = std::make_unique<tkv::runtime::Sequence>(*impl_->model, *impl_->tokenizer,
                                                            impl_->context, impl_->kv, impl_->pages,
                                                            *impl_->threads, impl_->ubatch);
    return Sequence(std::move(seq));
  });
}

std::vector<BatchOutcome> Engine::eval_batch(std::span<const BatchEntry> entries) {
  return translated([&] {
    std::vector<tkv::runtime::BatchFeed> feeds;
    std::vector<BatchOutcome> out(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      const BatchEntry& e = entries[i];
      if (e.sequence && e.sequence->impl_->engine != impl_) {
        out[i] = {.ok = false, .budget_exceeded = false, .message = "a sequence of another engine"};
        feeds.push_back({});  // refused by feed_batch too ("no sequence"), message kept
        continue;
      }
      feeds.push_back(
          {.session = e.sequence ? e.sequence->impl_->session.get() : nullptr, .tokens = e.tokens});
    }
    const std::lock_guard<std::mutex> lock(impl_->compute);
    const std::vector<tkv::model::ItemStatus> status = tkv::runtime::feed_batch(
        *impl_->model, impl_->batch_context, feeds, *impl_->threads, impl_->ubatch);
    for (size_t i = 0; i < entries.size(); ++i) {
      if (!out[i].ok || status[i].ok()) continue;
      out[i] = {.ok = false,
                .budget_exceeded = status[i].code == tkv::model::ItemStatus::Code::kBudgetExceeded,
                .message = status[i].message};
    }
    return out;
  });
}

Sequence::Sequence(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Sequence::Sequence(Sequence&&) noexcept = default;
Sequence& Sequence::operator=(Sequence&&) noexcept = default;
Sequence::~Sequence() = default;

Sequence Sequence::fork() const {
  return translated([&] {
    auto seq = std::make_unique<Impl>();
    seq->engine = impl_->engine;
    seq->session = impl_->session->fork();
    return Sequence(std::move(seq));
  });
}

void Sequence::truncate(int64_t n_tokens) {
  translated([&] { impl_->session->truncate(n_tokens); });
}

void Sequence::clear() {
  translated([&] { impl_->session->clear(); });
}

const std::vector<int32_t>& Sequence::tokens() const {
  return impl_->session->tokens();
}

int64_t Sequence::room() const {
  return impl_->session->room();
}

std::span<const float> Sequence::eval(std::span<const int32_t> tokens) {
  return translated([&] {
    const std::lock_guard<std::mutex> lock(impl_->engine->compute);
    impl_->session->feed(tokens);
    return logits();
  });
}

std::span<const float> Sequence::logits() const {
  return impl_->session->logits();
}

GenerateResult Sequence::generate(const GenerateParams& params, const TextCallback& on_text) {
  return translated([&] {
    tkv::runtime::Sequence& s = *impl_->session;
    if (s.logits().empty()) throw Error("generate: no logits (eval the prompt first)");
    for (const std::string& stop : params.stops)
      if (stop.empty()) throw Error("generate: a stop string is empty");
    s.set_sampler(sampler_config(params.sampling));
    for (int32_t id : s.tokens()) s.sampler().accept(id);  // the repetition penalty sees them
    tkv::runtime::GenerateOptions options;
    options.max_tokens = params.max_tokens;
    options.stop_at_eog = params.stop_at_eog;
    // The decoder sees the sequence first, so the continuation is spelled
    // as in the decoded whole.
    const std::vector<int32_t> seen = s.tokens();
    const tkv::runtime::ReplyText text{.stops = params.stops,
                                       .start = tkv::tok::StreamDecoder::Start::kTextStart,
                                       .spelled_after = seen};
    const std::lock_guard<std::mutex> lock(impl_->engine->compute);
    const tkv::runtime::TextGenerateResult r = tkv::runtime::generate_text(
        s, options, text, [&](std::string_view text) { return !on_text || on_text(text); });
    GenerateResult out;
    out.n_generated = r.generation.n_generated;
    switch (r.generation.reason) {
      case tkv::runtime::StopReason::kLength:
        out.reason = StopReason::kLength;
        break;
      case tkv::runtime::StopReason::kEndOfText:
        out.reason = StopReason::kEndOfText;
        break;
      case tkv::runtime::StopReason::kStopString:
        out.reason = StopReason::kStopString;
        break;
      case tkv::runtime::StopReason::kContextFull:
        out.reason = StopReason::kContextFull;
        break;
      case tkv::runtime::StopReason::kInterrupted:
      case tkv::runtime::StopReason::kCancelled:
        out.reason = StopReason::kCancelled;
        break;
    }
    return out;
  });
}

void Sequence::save(const std::string& path) const {
  translated([&] { impl_->session->save(path); });
}

void Sequence::load(const std::string& path) {
  translated([&] { impl_->session->load(path); });
}

struct Sampler::Impl {
  tkv::sample::Sampler sampler;
};

Sampler::Sampler(const SamplingParams& params)
    : impl_(translated([&] {
        return std::make_unique<Impl>(Impl{tkv::sample::Sampler(sampler_config(params))});
      })) {}
Sampler::~Sampler() = default;
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;

int32_t Sampler::sample(std::span<const float> logits) {
  return translated([&] {
    if (logits.empty()) throw Error("sample: no logits");
    return impl_->sampler.sample(logits.data(), int(logits.size()));
  });
}

void Sampler::accept(int32_t token) {
  impl_->sampler.accept(token);
}

int abi_version() {
  return TKV_ABI_VERSION;
}

std::string version() {
  return TURBOKV_VERSION;
}

}  // namespace turbokv
