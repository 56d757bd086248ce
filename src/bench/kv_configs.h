// The KV configurations a bench run compares: --kv LIST and a protocol's own
// list (--recall-kv, ...) are parsed by the shared KV flags (cli/kv_spec.h
// has the grammar; the label of a configuration is the item as written).
// Here: their JSON form (how a cell receives its configuration) and labels.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/json.h"
#include "cli/kv_spec.h"
#include "kv/kv_config.h"

namespace tkv::bench {

// One configuration of a run: its label, KvConfig and, for an item with a
// budgetSIZE policy part ("k4v2:budget64M", "k4v2:sel512+budget64M"), the
// RAM cap its pages run under: the cell gives its pool that budget and a
// spill directory it creates in a temporary directory (the disk tier), so
// pages over the cap move to disk instead of failing.
struct BenchKv : cli::KvSpec {
  uint64_t ram_budget = 0;  // 0 = no budgetSIZE part
  BenchKv() = default;
  BenchKv(cli::KvSpec spec, uint64_t budget = 0)
      : cli::KvSpec(std::move(spec)), ram_budget(budget) {}
};

// The items of a bench --kv LIST: the shared grammar (cli/kv_spec.h) plus
// the bench's budgetSIZE policy part (SIZE as --kv-budget takes it: 64M,
// 1.5G). `parse_item` parses one item without it (KvFlags::configs); the
// label stays the item as written. tkv::Error naming `flag` for a bad size,
// two budget parts or an item listed twice.
std::vector<BenchKv> parse_bench_kv_list(
    std::string_view list, std::string_view flag,
    const std::function<cli::KvSpec(const std::string& item)>& parse_item);
// The same with each item parsed from `defaults` (cli::parse_kv_spec).
std::vector<BenchKv> parse_bench_kv_list(std::string_view list, const kv::KvConfig& defaults = {});

// Lossless round trip through JSON (cells receive their configuration this way).
Json kv_config_to_json(const kv::KvConfig& config);
kv::KvConfig kv_config_from_json(const Json& j);
Json bench_kv_to_json(const BenchKv& kv);
BenchKv bench_kv_from_json(const Json& j);

// "4+64", "none", "4+64 w1024", "4+64 sel512": the effective policy in a few characters.
std::string policy_label(const kv::KvConfig& config);
// The same, then " budget 64 MiB" for an item with a RAM cap.
std::string policy_label(const BenchKv& kv);
// Bits per stored value of the main codecs, K and V averaged ("4.5", "3", "16").
double codec_bits(const kv::CodecSpec& spec, int head_dim);
// True for a configuration that stores exactly what f16 stores (the baseline).
bool is_f16_baseline(const kv::KvConfig& config);
// The same, and without a RAM cap or page selection (the baseline is plain
// dense f16).
bool is_f16_baseline(const BenchKv& kv);

}  // namespace tkv::bench
