#include "bench/kv_configs.h"

#include <charconv>

#include "common/error.h"

namespace tkv::bench {

namespace {

int parse_policy_number(std::string_view digits, std::string_view item) {
  int v = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size() || v < 0)
    fail("--kv ", item, ": policy part needs a non-negative number (e.g. s4, r64, w1024)");
  return v;
}

void apply_policy(std::string_view policy, std::string_view item, kv::KvConfig& c) {
  if (policy == "none") {
    c.sinks = 0;
    c.residual = 0;
    return;
  }
  size_t start = 0;
  while (start <= policy.size()) {
    const size_t plus = policy.find('+', start);
    const std::string_view part =
        policy.substr(start, plus == std::string_view::npos ? policy.npos : plus - start);
    if (part.size() < 2)
      fail("--kv ", item, ": policy '", policy, "' must be 'none' or parts like s4+r64+w1024");
    const int n = parse_policy_number(part.substr(1), item);
    switch (part[0]) {
      case 's':
        c.sinks = n;
        break;
      case 'r':
        c.residual = n;
        break;
      case 'w':
        c.window = n;
        break;
      default:
        fail("--kv ", item, ": unknown policy part '", part, "' (s = sinks, r = residual, ",
             "w = window)");
    }
    if (plus == std::string_view::npos) break;
    start = plus + 1;
  }
}

kv::CodecSpec codec_from_name(const std::string& name, std::string_view what) {
  const auto spec = kv::parse_codec(name);
  if (!spec) fail(what, ": unknown codec '", name, "'");
  return *spec;
}

}  // namespace

BenchKv parse_bench_kv(std::string_view item, const kv::KvConfig& defaults) {
  BenchKv out;
  out.label = std::string(item);
  out.config = defaults;
  const size_t colon = item.find(':');
  const std::string_view codecs = item.substr(0, colon);
  const size_t slash = codecs.find('/');
  if (slash != std::string_view::npos) {
    const auto k = kv::parse_codec(codecs.substr(0, slash));
    const auto v = kv::parse_codec(codecs.substr(slash + 1));
    if (!k || !v) fail("--kv ", item, ": unknown codec in '", codecs, "'");
    out.config.k = *k;
    out.config.v = *v;
  } else if (!kv::parse_kv_shorthand(codecs, out.config.k, out.config.v)) {
    fail("--kv ", item, ": '", codecs, "' is neither a codec (f16, q8_0, q4_0h, tq3, ...) ",
         "nor a kAvB shorthand (k4v2, k8v8, ...)");
  }
  if (colon != std::string_view::npos) apply_policy(item.substr(colon + 1), item, out.config);
  return out;
}

std::vector<BenchKv> parse_bench_kv_list(std::string_view list, const kv::KvConfig& defaults) {
  std::vector<BenchKv> out;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string_view item =
        list.substr(start, comma == std::string_view::npos ? list.npos : comma - start);
    if (item.empty()) fail("--kv: empty item in '", list, "'");
    out.push_back(parse_bench_kv(item, defaults));
    for (size_t i = 0; i + 1 < out.size(); ++i)
      if (out[i].label == out.back().label) fail("--kv: '", item, "' is listed twice");
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

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
