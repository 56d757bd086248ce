#include "bench/kv_configs.h"

#include <algorithm>

#include "cli/flags.h"
#include "common/error.h"
#include "common/sys_info.h"

namespace tkv::bench {

namespace {

kv::CodecSpec codec_from_name(const std::string& name, std::string_view what) {
  const auto spec = kv::parse_codec(name);
  if (!spec) fail(what, ": unknown codec '", name, "'");
  return *spec;
}

}  // namespace

Json kv_config_to_json(const kv::KvConfig& c) {
  Json j;
  j["k"] = c.k.name();
  j["v"] = c.v.name();
  j["sinks"] = c.sinks;
  j["residual"] = c.residual;
  j["window"] = c.window;
  j["swa_window_only"] = c.swa_window_only;
  j["page_tokens"] = c.page_tokens;
  j["budget_bytes"] = c.budget_bytes;
  j["seed"] = c.seed;
  j["select"] = c.select;
  j["select_prefill"] = c.select_prefill;
  j["select_dense_layers"] = c.select_dense_layers;
  Json overrides = Json::array();
  for (const auto& o : c.overrides)
    overrides.push_back({{"layer", o.layer}, {"k", o.k.name()}, {"v", o.v.name()}});
  j["overrides"] = overrides;
  return j;
}

kv::KvConfig kv_config_from_json(const Json& j) {
  kv::KvConfig c;
  c.k = codec_from_name(j.at("k").get<std::string>(), "cell request");
  c.v = codec_from_name(j.at("v").get<std::string>(), "cell request");
  c.sinks = j.at("sinks").get<int>();
  c.residual = j.at("residual").get<int>();
  c.window = j.at("window").get<int>();
  c.swa_window_only = j.value("swa_window_only", false);
  c.page_tokens = j.at("page_tokens").get<int>();
  c.budget_bytes = j.at("budget_bytes").get<uint64_t>();
  c.seed = j.at("seed").get<uint64_t>();
  c.select = j.value("select", 0);
  c.select_prefill = j.value("select_prefill", true);
  c.select_dense_layers = j.value("select_dense_layers", kv::KvConfig{}.select_dense_layers);
  for (const auto& o : j.at("overrides")) {
    kv::LayerOverride lo;
    lo.layer = o.at("layer").get<int>();
    lo.k = codec_from_name(o.at("k").get<std::string>(), "cell request");
    lo.v = codec_from_name(o.at("v").get<std::string>(), "cell request");
    c.overrides.push_back(lo);
  }
  return c;
}

Json bench_kv_to_json(const BenchKv& kv) {
  return {{"label", kv.label},
          {"config", kv_config_to_json(kv.config)},
          {"ram_budget_bytes", kv.ram_budget}};
}

BenchKv bench_kv_from_json(const Json& j) {
  return BenchKv(cli::KvSpec{j.at("label").get<std::string>(), kv_config_from_json(j.at("config"))},
                 j.value("ram_budget_bytes", uint64_t(0)));
}

std::vector<BenchKv> parse_bench_kv_list(
    std::string_view list, std::string_view flag,
    const std::function<cli::KvSpec(const std::string& item)>& parse_item) {
  std::vector<BenchKv> out;
  for (const std::string& item : cli::split_list(list, flag)) {
    // Takes the budget parts out of the policy; the rest is the shared grammar.
    const size_t colon = item.find(':');
    std::string rest = item.substr(0, colon), policy;
    uint64_t budget = 0;
    if (colon != std::string::npos) {
      const std::string parts = item.substr(colon + 1);
      for (size_t start = 0; start <= parts.size();) {
        const size_t plus = std::min(parts.find('+', start), parts.size());
        const std::string part = parts.substr(start, plus - start);
        start = plus + 1;
        if (part.rfind("budget", 0) != 0) {
          policy += (policy.empty() ? "" : "+") + part;
          continue;
        }
        if (budget > 0) fail(flag, " ", item, ": more than one budget part");
        try {
          budget = parse_bytes(part.substr(6));
        } catch (const Error& e) {
          fail(flag, " ", item, ": budget part needs a size, e.g. budget64M (", e.what(), ")");
        }
        if (budget == 0) fail(flag, " ", item, ": the budget must be larger than 0");
      }
      if (!policy.empty() || budget == 0) rest += ":" + policy;
    }
    cli::KvSpec spec = parse_item(rest);
    spec.label = item;
    out.emplace_back(std::move(spec), budget);
    for (size_t i = 0; i + 1 < out.size(); ++i)
      if (out[i].label == item) fail(flag, ": '", item, "' is listed twice");
  }
  return out;
}

std::string policy_label(const kv::KvConfig& c) {
  const int s = c.effective_sinks(), r = c.effective_residual();
  std::string out = (s == 0 && r == 0) ? "none" : str(s, "+", r);
  if (c.window > 0) out += str(" w", c.window);
  if (c.swa_window_only) out += " swa-window";
  if (c.select > 0) out += str(" sel", c.select, c.select_prefill ? "" : " dense-prefill");
  return out;
}

std::vector<BenchKv> parse_bench_kv_list(std::string_view list, const kv::KvConfig& defaults) {
  return parse_bench_kv_list(
      list, "--kv", [&](const std::string& item) { return cli::parse_kv_spec(item, defaults); });
}

std::string policy_label(const BenchKv& kv) {
  std::string out = policy_label(kv.config);
  if (kv.ram_budget > 0) out += " budget " + format_bytes(kv.ram_budget);
  return out;
}

double codec_bits(const kv::CodecSpec& spec, int head_dim) {
  // Bytes of one vector in a 64-token page, as stored (scales and norms included).
  const auto codec = kv::make_codec(spec, head_dim,
                                    spec.rotate || spec.kind == kv::CodecKind::TQ
                                        ? std::make_shared<const kv::Rotation>(head_dim, 1)
                                        : nullptr);
  return codec->bytes_per_vector(64) * 8.0 / head_dim;
}

bool is_f16_baseline(const kv::KvConfig& c) {
  return c.k.kind == kv::CodecKind::F16 && c.v.kind == kv::CodecKind::F16 && c.overrides.empty() &&
         c.window == 0;
}

bool is_f16_baseline(const BenchKv& kv) {
  return kv.ram_budget == 0 && kv.config.select == 0 && is_f16_baseline(kv.config);
}

}  // namespace tkv::bench
