// The C API (include/turbokv/turbokv.h) over the C++ API: every call
// catches everything, stores the message for tkv_last_error() and returns a
// status code.
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "turbokv/turbokv.h"
#include "turbokv/turbokv.hpp"

struct tkv_engine {
  turbokv::Engine engine;
};
struct tkv_sequence {
  turbokv::Sequence sequence;
};
struct tkv_sampler {
  turbokv::Sampler sampler;
};

namespace {

thread_local std::string g_last_error;

tkv_status failure(tkv_status status, const char* message) {
  try {
    g_last_error = message;
  } catch (...) {
    g_last_error.clear();  // no memory for the message: the status says enough
  }
  return status;
}

// Runs `fn` (which returns a tkv_status); any exception becomes a status:
// `file_status` is what a plain Error means for this call (a file that
// cannot be used, or a bad argument).
template <class F>
tkv_status guarded(tkv_status file_status, F&& fn) noexcept {
  try {
    return fn();
  } catch (const turbokv::BudgetExceeded& e) {
    return failure(TKV_ERR_BUDGET, e.what());
  } catch (const turbokv::OutOfMemory& e) {
    return failure(TKV_ERR_OUT_OF_MEMORY, e.what());
  } catch (const std::bad_alloc&) {
    return failure(TKV_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return failure(file_status, e.what());
  } catch (...) {
    return failure(TKV_ERR_INTERNAL, "unknown error");
  }
}

#define TKV_REQUIRE(cond)                                                              \
  do {                                                                                 \
    if (!(cond)) return failure(TKV_ERR_INVALID_ARGUMENT, "invalid argument: " #cond); \
  } while (0)

turbokv::SamplingParams sampling(const tkv_sampling_params& p) {
  return {.temperature = p.temperature,
          .top_k = p.top_k,
          .top_p = p.top_p,
          .min_p = p.min_p,
          .repeat_penalty = p.repeat_penalty,
          .repeat_last_n = p.repeat_last_n,
          .seed = p.seed};
}

}  // namespace

extern "C" {

int tkv_abi_version(void) {
  return TKV_ABI_VERSION;
}

const char* tkv_version(void) {
  static const std::string version = turbokv::version();
  return version.c_str();
}

const char* tkv_last_error(void) {
  return g_last_error.c_str();
}

const char* tkv_status_name(tkv_status status) {
  switch (status) {
    case TKV_OK:
      return "ok";
    case TKV_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case TKV_ERR_FILE:
      return "file not usable";
    case TKV_ERR_BUDGET:
      return "KV budget exceeded";
    case TKV_ERR_OUT_OF_MEMORY:
      return "out of memory";
    case TKV_ERR_BUFFER_TOO_SMALL:
      return "buffer too small";
    case TKV_ERR_CONTEXT_FULL:
      return "context full";
    case TKV_ERR_INTERNAL:
      return "internal error";
  }
  return "unknown status";
}

tkv_engine_params tkv_engine_default_params(void) {
  const turbokv::EngineOptions d;
  return {.threads = d.threads,
          .context = d.context,
          .ubatch = d.ubatch,
          .kv_cache_type = "f16",
          .kv_budget_bytes = d.kv_budget_bytes};
}

tkv_sampling_params tkv_sampling_default_params(void) {
  const turbokv::SamplingParams d;
  return {.temperature = d.temperature,
          .top_k = d.top_k,
          .top_p = d.top_p,
          .min_p = d.min_p,
          .repeat_penalty = d.repeat_penalty,
          .repeat_last_n = d.repeat_last_n,
          .seed = d.seed};
}

tkv_generate_params tkv_generate_default_params(void) {
  return {.max_tokens = -1,
          .stop_at_eog = true,
          .stops = nullptr,
          .n_stops = 0,
          .sampling = tkv_sampling_default_params()};
}

tkv_status tkv_engine_load(const char* model_path, const tkv_engine_params* params,
                           tkv_engine** out) {
  TKV_REQUIRE(model_path && out);
  *out = nullptr;
  const tkv_engine_params p = params ? *params : tkv_engine_default_params();
  return guarded(TKV_ERR_FILE, [&] {
    turbokv::EngineOptions o;
    o.threads = p.threads;
    o.context = p.context;
    o.ubatch = p.ubatch;
    o.kv_cache_type = p.kv_cache_type ? p.kv_cache_type : "f16";
    o.kv_budget_bytes = p.kv_budget_bytes;
    *out = new tkv_engine{turbokv::Engine(model_path, o)};
    return TKV_OK;
  });
}

void tkv_engine_free(tkv_engine* engine) {
  delete engine;
}

int32_t tkv_n_vocab(const tkv_engine* engine) {
  return engine ? engine->engine.n_vocab() : 0;
}

int32_t tkv_context_size(const tkv_engine* engine) {
  return engine ? engine->engine.context_size() : 0;
}

bool tkv_is_end_of_generation(const tkv_engine* engine, int32_t token) {
  return engine && engine->engine.is_end_of_generation(token);
}

tkv_status tkv_tokenize(const tkv_engine* engine, const char* text, size_t text_len, bool add_bos,
                        bool parse_special, int32_t* tokens, size_t capacity, size_t* n_tokens) {
  TKV_REQUIRE(engine && (text || text_len == 0) && (tokens || capacity == 0) && n_tokens);
  return guarded(TKV_ERR_INVALID_ARGUMENT, [&] {
    const std::vector<int32_t> ids = engine->engine.tokenize(
        std::string_view(text ? text : "", text_len), add_bos, parse_special);
    *n_tokens = ids.size();
    if (ids.size() > capacity)
      return failure(TKV_ERR_BUFFER_TOO_SMALL, "tokenize: the token buffer is too small");
    if (!ids.empty()) std::memcpy(tokens, ids.data(), ids.size() * sizeof(int32_t));
    return TKV_OK;
  });
}

tkv_status tkv_detokenize(const tkv_engine* engine, const int32_t* tokens, size_t n_tokens,
                          char* text, size_t capacity, size_t* length) {
  TKV_REQUIRE(engine && (tokens || n_tokens == 0) && (text || capacity == 0) && length);
  return guarded(TKV_ERR_INVALID_ARGUMENT, [&] {
    const std::string s = engine->engine.detokenize({tokens, n_tokens});
    *length = s.size();
    if (s.size() + 1 > capacity)
      return failure(TKV_ERR_BUFFER_TOO_SMALL, "detokenize: the text buffer is too small");
    std::memcpy(text, s.c_str(), s.size() + 1);
    return TKV_OK;
  });
}

tkv_status tkv_pool_usage(const tkv_engine* engine, uint64_t* bytes_in_use, uint64_t* budget) {
  TKV_REQUIRE(engine);
  return guarded(TKV_ERR_INTERNAL, [&] {
    const turbokv::PoolStats s = engine->engine.pool_stats();
    if (bytes_in_use) *bytes_in_use = s.bytes_in_use;
    if (budget) *budget = s.budget;
    return TKV_OK;
  });
}

tkv_status tkv_sequence_new(tkv_engine* engine, tkv_sequence** out) {
  TKV_REQUIRE(engine && out);
  *out = nullptr;
  return guarded(TKV_ERR_INVALID_ARGUMENT, [&] {
    *out = new tkv_sequence{engine->engine.new_sequence()};
    return TKV_OK;
  });
}

tkv_status tkv_sequence_fork(const tkv_sequence* seq, tkv_sequence** out) {
  TKV_REQUIRE(seq && out);
  *out = nullptr;
  return guarded(TKV_ERR_INVALID_ARGUMENT, [&] {
    *out = new tkv_sequence{seq->sequence.fork()};
    return TKV_OK;
  });
}

tkv_status tkv_sequence_truncate(tkv_sequence* seq, int64_t n) {
  TKV_REQUIRE(seq);
  return guarded(TKV_ERR_INVALID_ARGUMENT, [&] {
    seq->sequence.truncate(n);
    return TKV_OK;
  });
}

tkv_status tkv_sequence_clear(tkv_sequence* seq) {
  TKV_REQUIRE(seq);
  return guarded(TKV_ERR_INTERNAL, [&] {
    seq->sequence.clear();
    return TKV_OK;
  });
}

int64_t tkv_sequence_length(const tkv_sequence* seq) {
  return seq ? int64_t(seq->sequence.tokens().size()) : 0;
}

void tkv_sequence_free(tkv_sequence* seq) {
  delete seq;
}

tkv_status tkv_eval(tkv_sequence* seq, const int32_t* tokens, size_t n_tokens,
                    const float** logits) {
  TKV_REQUIRE(seq && (tokens || n_tokens == 0));
  return guarded(TKV_ERR_INVALID_ARGUMENT, [&] {
    if (int64_t(n_tokens) > seq->sequence.room())
      return failure(TKV_ERR_CONTEXT_FULL,
                     ("eval: " + std::to_string(n_tokens) + " tokens, room for " +
                      std::to_string(seq->sequence.room()))
                         .c_str());
    const std::span<const float> l = seq->sequence.eval({tokens, n_tokens});
    if (logits) *logits = l.empty() ? nullptr : l.data();
    return TKV_OK;
  });
}

tkv_status tkv_sequence_logits(const tkv_sequence* seq, const float** logits) {
  TKV_REQUIRE(seq && logits);
  const std::span<const float> l = seq->sequence.logits();
  *logits = l.empty() ? nullptr : l.data();
  return TKV_OK;
}

tkv_status tkv_eval_batch(tkv_engine* engine, tkv_batch_item* items, size_t n_items) {
  TKV_REQUIRE(engine && (items || n_items == 0));
  for (size_t i = 0; i < n_items; ++i)
    TKV_REQUIRE(items[i].sequence && (items[i].tokens || items[i].n_tokens == 0));
  return guarded(TKV_ERR_INVALID_ARGUMENT, [&] {
    std::vector<turbokv::BatchEntry> entries;
    for (size_t i = 0; i < n_items; ++i)
      entries.push_back({&items[i].sequence->sequence, {items[i].tokens, items[i].n_tokens}});
    const std::vector<turbokv::BatchOutcome> out = engine->engine.eval_batch(entries);
    for (size_t i = 0; i < n_items; ++i) {
      items[i].status = TKV_OK;
      if (out[i].ok) continue;
      const bool full = out[i].message.rfind("context full", 0) == 0;
      items[i].status = out[i].budget_exceeded ? TKV_ERR_BUDGET
                        : full                 ? TKV_ERR_CONTEXT_FULL
                                               : TKV_ERR_INVALID_ARGUMENT;
      failure(items[i].status, out[i].message.c_str());
    }
    return TKV_OK;
  });
}

tkv_status tkv_generate(tkv_sequence* seq, const tkv_generate_params* params,
                        tkv_text_callback on_text, void* user_data, tkv_generate_result* result) {
  TKV_REQUIRE(seq && params && (params->stops || params->n_stops == 0));
  return guarded(TKV_ERR_INVALID_ARGUMENT, [&] {
    turbokv::GenerateParams p;
    p.max_tokens = params->max_tokens;
    p.stop_at_eog = params->stop_at_eog;
    for (size_t i = 0; i < params->n_stops; ++i) {
      if (!params->stops[i])
        return failure(TKV_ERR_INVALID_ARGUMENT, "generate: a null stop string");
      p.stops.emplace_back(params->stops[i]);
    }
    p.sampling = sampling(params->sampling);
    const turbokv::GenerateResult r = seq->sequence.generate(p, [&](std::string_view text) {
      return !on_text || on_text(text.data(), text.size(), user_data);
    });
    if (result) *result = {.reason = tkv_stop_reason(r.reason), .n_generated = r.n_generated};
    return TKV_OK;
  });
}

tkv_status tkv_session_save(const tkv_sequence* seq, const char* path) {
  TKV_REQUIRE(seq && path);
  return guarded(TKV_ERR_FILE, [&] {
    seq->sequence.save(path);
    return TKV_OK;
  });
}

tkv_status tkv_session_load(tkv_sequence* seq, const char* path) {
  TKV_REQUIRE(seq && path);
  return guarded(TKV_ERR_FILE, [&] {
    seq->sequence.load(path);
    return TKV_OK;
  });
}

tkv_status tkv_sampler_new(const tkv_sampling_params* params, tkv_sampler** out) {
  TKV_REQUIRE(out);
  *out = nullptr;
  const tkv_sampling_params p = params ? *params : tkv_sampling_default_params();
  return guarded(TKV_ERR_INVALID_ARGUMENT, [&] {
    *out = new tkv_sampler{turbokv::Sampler(sampling(p))};
    return TKV_OK;
  });
}

tkv_status tkv_sampler_sample(tkv_sampler* sampler, const float* logits, int32_t n_vocab,
                              int32_t* token) {
  TKV_REQUIRE(sampler && logits && n_vocab > 0 && token);
  return guarded(TKV_ERR_INVALID_ARGUMENT, [&] {
    *token = sampler->sampler.sample({logits, size_t(n_vocab)});
    return TKV_OK;
  });
}

tkv_status tkv_sampler_accept(tkv_sampler* sampler, int32_t token) {
  TKV_REQUIRE(sampler);
  return guarded(TKV_ERR_INTERNAL, [&] {
    sampler->sampler.accept(token);
    return TKV_OK;
  });
}

void tkv_sampler_free(tkv_sampler* sampler) {
  delete sampler;
}

}  // extern "C"
