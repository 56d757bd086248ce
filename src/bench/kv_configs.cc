#include "bench/kv_configs.h"

#include "common/error.h"

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
  return {{"label", kv.label}, {"config", kv_config_to_json(kv.config)}};
}

BenchKv bench_kv_from_json(const Json& j) {
  return {j.at("label").get<std::string>(), kv_config_from_json(j.at("config"))};
}

std::string policy_label(const kv::KvConfig& c) {
  const int s = c.effective_sinks(), r = c.effective_residual();
  std::string out = (s == 0 && r == 0) ? "none" : str(s, "+", r);
  if (c.window > 0) out += str(" w", c.window);
  if (c.select > 0) out += str(" sel", c.select, c.select_prefill ? "" : " dense-prefill");
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

}  // namespace tkv::bench
