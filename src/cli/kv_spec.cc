#include "cli/kv_spec.h"

#include <charconv>

#include "cli/flags.h"
#include "common/error.h"

namespace tkv::cli {

namespace {

int parse_policy_number(std::string_view digits, std::string_view item, std::string_view flag) {
  int v = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size() || v < 0)
    fail(flag, " ", item,
         ": policy part needs a non-negative number (e.g. s4, r64, w1024, sel512)");
  return v;
}

void apply_policy(std::string_view policy, std::string_view item, std::string_view flag,
                  kv::KvConfig& c) {
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
      fail(flag, " ", item, ": policy '", policy,
           "' must be 'none' or parts like s4+r64+w1024 or sel512");
    if (part.substr(0, 3) == "sel") {
      c.select = parse_policy_number(part.substr(3), item, flag);
    } else {
      const int n = parse_policy_number(part.substr(1), item, flag);
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
          fail(flag, " ", item, ": unknown policy part '", part, "' (s = sinks, r = residual, ",
               "w = window, sel = page selection)");
      }
    }
    if (plus == std::string_view::npos) break;
    start = plus + 1;
  }
}

}  // namespace

KvSpec parse_kv_spec(std::string_view item, const kv::KvConfig& defaults, std::string_view flag) {
  KvSpec out;
  out.label = std::string(item);
  out.config = defaults;
  const size_t colon = item.find(':');
  const std::string_view codecs = item.substr(0, colon);
  const size_t slash = codecs.find('/');
  bool known = false;
  if (slash != std::string_view::npos) {
    const auto k = kv::parse_codec(codecs.substr(0, slash));
    const auto v = kv::parse_codec(codecs.substr(slash + 1));
    if (k && v) {
      out.config.k = *k;
      out.config.v = *v;
      known = true;
    }
  } else {
    known = kv::parse_kv_shorthand(codecs, out.config.k, out.config.v);
  }
  if (!known)
    fail(flag, ": unknown KV spec '", codecs, "' (a codec name: ", kKvCodecNames,
         "; K/V codecs, e.g. tq4/tq2; or kAvB, e.g. k4v2, k8v4)");
  if (colon != std::string_view::npos) apply_policy(item.substr(colon + 1), item, flag, out.config);
  return out;
}

std::vector<KvSpec> parse_kv_spec_list(std::string_view list, const kv::KvConfig& defaults,
                                       std::string_view flag) {
  std::vector<KvSpec> out;
  for (const std::string& item : split_list(list, flag)) {
    out.push_back(parse_kv_spec(item, defaults, flag));
    for (size_t i = 0; i + 1 < out.size(); ++i)
      if (out[i].label == out.back().label) fail(flag, ": '", item, "' is listed twice");
  }
  return out;
}

}  // namespace tkv::cli
