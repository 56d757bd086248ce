// The summary line `turbokv run` ends with (on stderr), also used by chat's
// /stats: speed of prefill and decode, peak memory of the process, and what
// the KV cache holds.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/generation.h"
#include "sample/sampler.h"

namespace tkv::cli {

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
};

// "prompt 12 tok (0 cached) | prefill 12 tok in 0.05 s, 240.0 tok/s | TTFT 0.06 s |
//  decode 99 tok in 0.40 s, 247.5 tok/s | generated 100 (length) | peak RSS 1.2 GiB |
//  model 1.1 MiB | KV 512.0 KiB persistent, 12.0 KiB peak scratch | kv k=f16 v=f16 ... |
//  sampling greedy | threads 2"
std::string run_summary(const runtime::Sequence& session,
                        const sample::SamplerConfig& sampling, int threads,
                        const RunFigures& figures);
void print_run_summary(const runtime::Sequence& session,
                       const sample::SamplerConfig& sampling, int threads,
                       const RunFigures& figures);

}  // namespace tkv::cli
