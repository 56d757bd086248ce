// The summary line `turbokv run` ends with (on stderr): speed of prefill and
// decode, peak memory of the process and what holds it, and what the KV
// cache holds.
#pragma once

#include <cstdint>
#include <string>

#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/generation.h"
#include "sample/sampler.h"

namespace tkv::cli {

// What holds the process's peak resident memory: the engine's own figures
// for what it allocated, the OS's (/proc/self/smaps, at the end of the run)
// for the model file, code and stacks. The parts plus other() are the peak.
struct MemoryFigures {
  uint64_t peak_rss = 0;
  uint64_t model_resident = 0;   // the model file's mapping (or its copy), resident
  uint64_t kv = 0;               // the KV cache's pages, sinks and residual in RAM
  uint64_t kv_scratch = 0;       // its peak scratch: a chunk's f16 rows, attention
  uint64_t activations = 0;      // the forward pass's row buffers and logits
  uint64_t product_scratch = 0;  // the products' converted and packed activations
  uint64_t tokenizer = 0;        // vocabulary, lookup tables, merges, pre-tokenizer
  uint64_t code = 0;             // the binary and shared libraries (OS)
  uint64_t stacks = 0;           // thread stacks (OS)
  // The peak less every part above: malloc's headers and free blocks, small
  // objects (the prompt, its ids), memory freed before the end of the run.
  int64_t other() const;
};
// Takes the figures now, after the generation (peak_rss last, so that the
// peak includes what reading smaps took): `kv` is the cache's stats.
// The activations and product scratch are those of the model's own context
// (Model::eval), on the thread that ran it: the calling thread.
MemoryFigures measure_memory(const model::Model& model, const kv::KvStats& kv,
                             uint64_t tokenizer_bytes);
// "peak 107.12 MiB = model file 44.05 MiB + KV 30.94 MiB + ... + other 1.90 MiB"
std::string describe_memory(const MemoryFigures& m);

struct RunFigures {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // of which restored from a prompt cache
  int64_t prefilled = 0;      // of which evaluated now
  double prefill_seconds = 0;
  double time_to_first_token = 0;
  int64_t generated = 0;
  int64_t decoded = 0;  // single-token evals (generated tokens fed back)
  double decode_seconds = 0;
  runtime::StopReason stop = runtime::StopReason::kLength;
  MemoryFigures memory;
};

// "prompt 12 tok (0 cached) | prefill 12 tok in 0.05 s, 240.0 tok/s | TTFT 0.06 s |
//  decode 99 tok in 0.40 s, 247.5 tok/s | generated 100 (length) | peak RSS 1.2 GiB |
//  model 1.1 MiB | KV 512.0 KiB persistent, 12.0 KiB peak scratch | kv k=f16 v=f16 ... |
//  sampling greedy | threads 2 | memory peak 1.2 GiB = model file 1.1 MiB + ... + other 1.3 MiB"
std::string run_summary(const runtime::Sequence& session,
                        const sample::SamplerConfig& sampling, int threads,
                        const RunFigures& figures);
void print_run_summary(const runtime::Sequence& session,
                       const sample::SamplerConfig& sampling, int threads,
                       const RunFigures& figures);

}  // namespace tkv::cli
