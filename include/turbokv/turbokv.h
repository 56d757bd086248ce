/* turbokv's C API: embed the engine in a program (any language with a C FFI).
 *
 *   tkv_engine* engine = NULL;
 *   tkv_engine_params params = tkv_engine_default_params();
 *   if (tkv_engine_load("model.gguf", &params, &engine) != TKV_OK) {
 *     fprintf(stderr, "%s\n", tkv_last_error());
 *     return 1;
 *   }
 *
 * Handles are opaque: a tkv_engine is one loaded model, one KV page pool
 * with a byte budget shared by all its sequences, and one thread pool; a
 * tkv_sequence is one token sequence whose compressed KV pages come from
 * that pool; a tkv_sampler is sampling state for a caller's own loop.
 *
 * Errors: every call that can fail returns a tkv_status; TKV_OK is 0. The
 * message of the calling thread's last failure is tkv_last_error() (one
 * line, valid until that thread's next failing call). No C++ exception
 * crosses this API. A failed call changes nothing.
 *
 * Threads (per call below): "any thread" calls may run concurrently with
 * any other call. Calls that run the model (tkv_eval, tkv_generate) are
 * serialized per engine. A tkv_sequence or tkv_sampler must not be used by
 * two threads at once. Callbacks must not call into the same engine. Free
 * every sequence before its engine.
 *
 * ABI: libturbokv.so.TKV_ABI_VERSION. The version changes whenever a
 * function, struct or enum value here changes incompatibly; compare
 * tkv_abi_version() with TKV_ABI_VERSION to check the library at run time.
 * Structs passed by pointer are initialized with their *_default_params().
 */
#ifndef TURBOKV_H
#define TURBOKV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TKV_ABI_VERSION 1

#if defined(__GNUC__)
#define TKV_API __attribute__((visibility("default")))
#else
#define TKV_API
#endif

typedef enum tkv_status {
  TKV_OK = 0,
  TKV_ERR_INVALID_ARGUMENT = 1, /* a null pointer, a value out of range, a bad token id */
  TKV_ERR_FILE = 2,             /* a model or session file missing, unreadable or not usable */
  TKV_ERR_BUDGET = 3,           /* the KV pool's byte budget cannot hold it */
  TKV_ERR_OUT_OF_MEMORY = 4,    /* the system could not provide memory */
  TKV_ERR_BUFFER_TOO_SMALL = 5, /* the output buffer is too small: the size needed is set */
  TKV_ERR_CONTEXT_FULL = 6,     /* the tokens do not fit the sequence's context */
  TKV_ERR_INTERNAL = 7
} tkv_status;

typedef enum tkv_stop_reason {
  TKV_STOP_LENGTH = 0,       /* max_tokens generated */
  TKV_STOP_END_OF_TEXT = 1,  /* an end-of-generation token (not shown, not fed) */
  TKV_STOP_STOP_STRING = 2,  /* a stop string (not shown) */
  TKV_STOP_CONTEXT_FULL = 3, /* no room for the next token */
  TKV_STOP_CANCELLED = 4     /* the callback returned false */
} tkv_stop_reason;

typedef struct tkv_engine tkv_engine;
typedef struct tkv_sequence tkv_sequence;
typedef struct tkv_sampler tkv_sampler;

typedef struct tkv_engine_params {
  int32_t threads;           /* 0: one per physical core */
  int32_t context;           /* tokens per sequence; 0: the model's trained context */
  int32_t ubatch;            /* tokens per prefill chunk (default 512) */
  const char* kv_cache_type; /* "f16" (default), "q8_0", "k4v2", ... as `turbokv run --kv` */
  uint64_t kv_budget_bytes;  /* every sequence's pages together; 0: unlimited */
} tkv_engine_params;

typedef struct tkv_sampling_params { /* llama.cpp's defaults; temperature 0 is greedy */
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  float repeat_penalty;
  int32_t repeat_last_n;
  uint64_t seed;
} tkv_sampling_params;

typedef struct tkv_generate_params {
  int64_t max_tokens;       /* < 0: until end of text or a full context */
  bool stop_at_eog;         /* default true */
  const char* const* stops; /* n_stops NUL-terminated stop strings (may be NULL) */
  size_t n_stops;
  tkv_sampling_params sampling;
} tkv_generate_params;

typedef struct tkv_generate_result {
  tkv_stop_reason reason;
  int64_t n_generated;
} tkv_generate_result;

/* Receives `len` bytes of text (not NUL-terminated) as it becomes safe to
 * show; returns false to cancel the generation. */
typedef bool (*tkv_text_callback)(const char* text, size_t len, void* user_data);

/* ---- library (any thread) ---- */
TKV_API int tkv_abi_version(void);
TKV_API const char* tkv_version(void);
/* The calling thread's last error message ("" if none). */
TKV_API const char* tkv_last_error(void);
TKV_API const char* tkv_status_name(tkv_status status);
TKV_API tkv_engine_params tkv_engine_default_params(void);
TKV_API tkv_sampling_params tkv_sampling_default_params(void);
TKV_API tkv_generate_params tkv_generate_default_params(void);

/* ---- engine ---- */
/* Any thread. params may be NULL (defaults). */
TKV_API tkv_status tkv_engine_load(const char* model_path, const tkv_engine_params* params,
                                   tkv_engine** out);
/* No call on the engine or its sequences may be running or follow. NULL is ignored. */
TKV_API void tkv_engine_free(tkv_engine* engine);
/* Any thread. */
TKV_API int32_t tkv_n_vocab(const tkv_engine* engine);
TKV_API int32_t tkv_context_size(const tkv_engine* engine);
TKV_API bool tkv_is_end_of_generation(const tkv_engine* engine, int32_t token);
/* Any thread. Writes up to `capacity` ids to `tokens` and the count to
 * *n_tokens; TKV_ERR_BUFFER_TOO_SMALL (with *n_tokens the count needed)
 * when they do not fit. */
TKV_API tkv_status tkv_tokenize(const tkv_engine* engine, const char* text, size_t text_len,
                                bool add_bos, bool parse_special, int32_t* tokens, size_t capacity,
                                size_t* n_tokens);
/* Any thread. The text of the tokens as a stream shows it, NUL-terminated;
 * *length (without the NUL) is set; TKV_ERR_BUFFER_TOO_SMALL when
 * capacity < *length + 1. */
TKV_API tkv_status tkv_detokenize(const tkv_engine* engine, const int32_t* tokens, size_t n_tokens,
                                  char* text, size_t capacity, size_t* length);
/* Any thread: bytes held in the KV pool by all sequences, and its budget. */
TKV_API tkv_status tkv_pool_usage(const tkv_engine* engine, uint64_t* bytes_in_use,
                                  uint64_t* budget);

/* ---- sequences ---- */
/* Any thread. TKV_ERR_BUDGET when the pool cannot hold a new sequence. */
TKV_API tkv_status tkv_sequence_new(tkv_engine* engine, tkv_sequence** out);
/* A new sequence sharing every page of `seq` (copy-on-write). Not while
 * `seq` is in use by another thread. */
TKV_API tkv_status tkv_sequence_fork(const tkv_sequence* seq, tkv_sequence** out);
/* Keep the first n tokens. */
TKV_API tkv_status tkv_sequence_truncate(tkv_sequence* seq, int64_t n);
TKV_API tkv_status tkv_sequence_clear(tkv_sequence* seq);
TKV_API int64_t tkv_sequence_length(const tkv_sequence* seq);
/* NULL is ignored. */
TKV_API void tkv_sequence_free(tkv_sequence* seq);

/* Appends the tokens and sets *logits (may be NULL) to the n_vocab logits
 * predicting the next token, valid until the next call on `seq`.
 * Serialized per engine. */
TKV_API tkv_status tkv_eval(tkv_sequence* seq, const int32_t* tokens, size_t n_tokens,
                            const float** logits);
/* The logits of the sequence's last eval (NULL before one, and after
 * truncate, clear, load or fork), valid until the next call on `seq`. */
TKV_API tkv_status tkv_sequence_logits(const tkv_sequence* seq, const float** logits);

/* One item of tkv_eval_batch; `status` is set per item. */
typedef struct tkv_batch_item {
  tkv_sequence* sequence;
  const int32_t* tokens;
  size_t n_tokens;
  tkv_status status; /* out: TKV_OK, TKV_ERR_BUDGET, TKV_ERR_CONTEXT_FULL, ... */
} tkv_batch_item;

/* Appends each item's tokens to its sequence in one batched forward (every
 * weight matmul once over all rows; attention per sequence); afterwards
 * tkv_sequence_logits gives each one's logits, the same as tkv_eval alone.
 * Returns TKV_OK when the batch ran (see each item's status; a failed item
 * keeps the ubatch rounds it finished), an error when it could not start.
 * Serialized per engine. */
TKV_API tkv_status tkv_eval_batch(tkv_engine* engine, tkv_batch_item* items, size_t n_items);

/* Samples from the last eval's logits, streams text to `on_text` (may be
 * NULL), feeds each token back; `result` may be NULL. Serialized per engine. */
TKV_API tkv_status tkv_generate(tkv_sequence* seq, const tkv_generate_params* params,
                                tkv_text_callback on_text, void* user_data,
                                tkv_generate_result* result);

/* One session file (KV pages and token ids), written atomically. */
TKV_API tkv_status tkv_session_save(const tkv_sequence* seq, const char* path);
/* Transactional: on failure the sequence is exactly as it was. */
TKV_API tkv_status tkv_session_load(tkv_sequence* seq, const char* path);

/* ---- sampling for a caller's own loop (a sampler: one thread at a time) ---- */
TKV_API tkv_status tkv_sampler_new(const tkv_sampling_params* params, tkv_sampler** out);
TKV_API tkv_status tkv_sampler_sample(tkv_sampler* sampler, const float* logits, int32_t n_vocab,
                                      int32_t* token);
TKV_API tkv_status tkv_sampler_accept(tkv_sampler* sampler, int32_t token);
TKV_API void tkv_sampler_free(tkv_sampler* sampler);

#ifdef __cplusplus
}
#endif

#endif /* TURBOKV_H */
