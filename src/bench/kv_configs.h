// The KV configurations a bench run compares: --kv LIST and a protocol's own
// list (--recall-kv, ...) are parsed by the shared KV flags (cli/kv_spec.h
// has the grammar; the label of a configuration is the item as written).
// Here: their JSON form (how a cell receives its configuration) and labels.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bench/json.h"
#include "cli/kv_spec.h"
#include "kv/kv_config.h"

namespace tkv::bench {

// One configuration of a run: its label and KvConfig.
using BenchKv = cli::KvSpec;

// Lossless round trip through JSON (cells receive their configuration this way).
Json kv_config_to_json(const kv::KvConfig& config);
kv::KvConfig kv_config_from_json(const Json& j);
Json bench_kv_to_json(const BenchKv& kv);
BenchKv bench_kv_from_json(const Json& j);

// "4+64", "none", "4+64 w1024", "4+64 sel512": the effective policy in a few characters.
std::string policy_label(const kv::KvConfig& config);
// Bits per stored value of the main codecs, K and V averaged ("4.5", "3", "16").
double codec_bits(const kv::CodecSpec& spec, int head_dim);
// True for a configuration that stores exactly what f16 stores (the baseline).
bool is_f16_baseline(const kv::KvConfig& config);

}  // namespace tkv::bench
