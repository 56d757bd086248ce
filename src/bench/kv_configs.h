// The KV configurations a bench run compares, as given to --kv:
//
//   ITEM[,ITEM...]      ITEM = CODECS[:POLICY]
//   CODECS  = a --kv shorthand ("f16", "q4_0h", "k4v2", ...) or K/V codec
//             names ("tq4/tq2", "q8_0/f16")
//   POLICY  = "none" (no sinks, no residual) or '+'-joined parts
//             sN (sinks), rN (residual), wN (window), e.g. "s4+r64", "s1+r0", "w1024"
//
// Parts a POLICY leaves out come from the run-wide flags (--kv-sinks,
// --kv-residual, --kv-window; default: 4 sinks + 64 residual for quantized
// codecs). The label of a configuration is the item as written.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bench/json.h"
#include "kv/kv_config.h"

namespace tkv::bench {

struct BenchKv {
  std::string label;
  kv::KvConfig config;
};

// Throws tkv::Error naming the item and what is wrong with it.
BenchKv parse_bench_kv(std::string_view item, const kv::KvConfig& defaults);
std::vector<BenchKv> parse_bench_kv_list(std::string_view list, const kv::KvConfig& defaults);

// Lossless round trip through JSON (cells receive their configuration this way).
Json kv_config_to_json(const kv::KvConfig& config);
kv::KvConfig kv_config_from_json(const Json& j);
Json bench_kv_to_json(const BenchKv& kv);
BenchKv bench_kv_from_json(const Json& j);

// "4+64", "none", "4+64 w1024": the effective policy in a few characters.
std::string policy_label(const kv::KvConfig& config);
// Bits per stored value of the main codecs, K and V averaged ("4.5", "3", "16").
double codec_bits(const kv::CodecSpec& spec, int head_dim);
// True for a configuration that stores exactly what f16 stores (the baseline).
bool is_f16_baseline(const kv::KvConfig& config);

}  // namespace tkv::bench
