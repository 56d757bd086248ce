// bench serve: a live `turbokv serve` driven over HTTP by concurrent
// clients, the way an application would use it.
//
// One cell per KV configuration and client count N: the cell starts
// `turbokv serve` (this binary) on port 0 with --parallel N, waits for
// /health, then N client threads each stream one /v1/completions request
// at once (greedy, --prompt-tokens P token ids, max_tokens G; each client's
// prompt differs, or shares its first --shared-prefix T tokens). Per stream:
// time to first token and the gaps between the SSE chunks as they arrive.
// Per cell: aggregate generated tok/s over the wall time of all N streams,
// decode-phase tok/s (the tokens after each stream's first, from the first
// stream's first token to the last stream's last), TTFT and inter-token
// latency p50/p99, the server's peak RSS (VmHWM, read
// before it is stopped) and the KV pool bytes of GET /metrics
// (turbokv_kv_cache_used_bytes, polled during the run: its peak). Requests
// the server cannot admit under --kv-budget fail (503 or a budget error);
// the summary gives the largest N whose requests all succeeded.
//
// --long-prompt L: one more client (the server gets --parallel N+1) sends
// an L-token prompt once the N streams have their first token; the cell
// gives its TTFT and the others' gaps that overlap its prefill.
// --url URL: the cells drive that server (llama.cpp's llama-server, say)
// instead of starting one: one cell per client count, KV column "url", no
// peak RSS; prompts are token ids, so both servers see the same lengths.
// --capacity: per KV item, one server (--parallel 1) gets distinct
// --prompt-tokens prompts with max_tokens 1, one at a time, until
// turbokv_prefix_cache_evictions_total moves (or --capacity-max requests):
// the most prefixes it held in RAM at once (turbokv_prefix_cache_entries
// {tier="ram"}) is the conversations of that length its --kv-budget holds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/options.h"
#include "bench/plan.h"

namespace tkv::bench {

struct ServeOptions {
  std::vector<int> clients{1, 8};
  int64_t prompt_tokens = 128;
  int64_t gen_tokens = 64;
  int64_t shared_prefix = 0;
  // > 0: one more client sends a prompt of this many tokens once the others
  // are streaming; the cell reports its TTFT and the others' inter-token
  // latency during its prefill.
  int64_t long_prompt = 0;
  // Drive this already running OpenAI-compatible server (http://HOST:PORT)
  // instead of starting `turbokv serve`; "" = start one per KV item.
  std::string url;
  // > 0: the capacity count instead of the client cells: per KV item, up
  // to this many distinct prompts (max_tokens 1) one after another until
  // /metrics shows a cached prefix evicted; the peak count held in RAM.
  int capacity_max = 0;
  std::string kv_budget;  // --kv-budget as given ("" = the server's default)
  // Bench flags passed on to the server as its own (--kv-sinks N, -ub N, ...).
  std::vector<std::string> server_flags;
  std::string server_exe;  // the binary whose `serve` runs
};

std::vector<PlannedCell> plan_serve(const CommonOptions& o, const ServeOptions& s,
                                    const ModelInfo& info);
// {"options", "rows", "cells", "capacity"}.
Json summarize_serve(const ServeOptions& s, std::vector<Json> rows);
// One line per cell, the largest N per configuration, then the table.
std::string serve_markdown(const Json& section);

}  // namespace tkv::bench
