#include "kv/kv_config.h"

#include <cctype>
#include <charconv>
#include <string>

#include "common/error.h"

namespace tkv::kv {

namespace {

constexpr int kDefaultSinks = 4;
constexpr int kDefaultResidual = 64;

bool any_quantized(const KvConfig& c) {
  if (c.k.quantized() || c.v.quantized()) return true;
  for (const auto& o : c.overrides)
    if (o.k.quantized() || o.v.quantized()) return true;
  return false;
}

// Resolves a possibly negative layer index; -1 means the last layer.
int resolve_layer(int layer, int n_layers) {
  return layer < 0 ? n_layers + layer : layer;
}

std::optional<CodecSpec> codec_for_bits(int bits) {
  if (bits == 8) return parse_codec("q8_0h");
  if (bits >= 1 && bits <= 4) return parse_codec("tq" + std::to_string(bits));
  return std::nullopt;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

int KvConfig::effective_sinks() const {
  return sinks >= 0 ? sinks : (any_quantized(*this) ? kDefaultSinks : 0);
}

int KvConfig::effective_residual() const {
  return residual >= 0 ? residual : (any_quantized(*this) ? kDefaultResidual : 0);
}

CodecSpec KvConfig::k_for(int layer, int n_layers) const {
  CodecSpec spec = k;
  for (const auto& o : overrides)
    if (resolve_layer(o.layer, n_layers) == layer) spec = o.k;
  return spec;
}

CodecSpec KvConfig::v_for(int layer, int n_layers) const {
  CodecSpec spec = v;
  for (const auto& o : overrides)
    if (resolve_layer(o.layer, n_layers) == layer) spec = o.v;
  return spec;
}

std::string KvConfig::describe_storage() const {
  std::string s =
      str("k=", k.name(), " v=", v.name(), " sinks=", effective_sinks(),
          " residual=", effective_residual(), " window=", window, " page=", page_tokens);
  if (swa_window_only) s += " swa=window";
  for (const auto& o : overrides) s += str(" layer", o.layer, "=k:", o.k.name(), "/v:", o.v.name());
  return s;
}

std::string KvConfig::describe() const {
  std::string s = describe_storage();
  if (select > 0) {
    s += str(" select=", select, select_prefill ? "" : " prefill=dense");
    if (select_dense_layers != KvConfig{}.select_dense_layers)
      s += str(" dense_layers=", select_dense_layers);
  }
  return s;
}

bool parse_kv_shorthand(std::string_view text, CodecSpec& k, CodecSpec& v) {
  const std::string t = trim(text);
  if (auto same = parse_codec(t)) {
    k = v = *same;
    return true;
  }
  // kAvB
  if (t.size() >= 4 && (t[0] == 'k' || t[0] == 'K')) {
    const size_t vpos = t.find_first_of("vV");
    if (vpos == std::string::npos || vpos < 2 || vpos + 1 >= t.size()) return false;
    int a = 0, b = 0;
    auto ra = std::from_chars(t.data() + 1, t.data() + vpos, a);
    auto rb = std::from_chars(t.data() + vpos + 1, t.data() + t.size(), b);
    if (ra.ec != std::errc() || ra.ptr != t.data() + vpos) return false;
    if (rb.ec != std::errc() || rb.ptr != t.data() + t.size()) return false;
    auto ka = codec_for_bits(a), vb = codec_for_bits(b);
    if (!ka || !vb) return false;
    k = *ka;
    v = *vb;
    return true;
  }
  return false;
}

std::vector<LayerOverride> parse_layer_overrides(std::string_view text) {
  std::vector<LayerOverride> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string item = trim(text.substr(start, end - start));
    start = end + 1;
    if (item.empty()) {
      if (end == text.size()) break;
      continue;
    }
    const size_t colon = item.find(':');
    if (colon == std::string::npos)
      fail("layer override '", item, "': expected LAYERS:CODECS, e.g. 0,-1:k8v4");
    CodecSpec k, v;
    const std::string codecs = item.substr(colon + 1);
    if (!parse_kv_shorthand(codecs, k, v))
      fail("layer override '", item, "': unknown codec pair '", codecs,
           "' (use e.g. f16, q8_0, k8v4, k4v2)");
    const std::string layers = item.substr(0, colon);
    size_t ls = 0;
    while (ls <= layers.size()) {
      size_t le = layers.find(',', ls);
      if (le == std::string::npos) le = layers.size();
      const std::string num = trim(std::string_view(layers).substr(ls, le - ls));
      int layer = 0;
      auto r = std::from_chars(num.data(), num.data() + num.size(), layer);
      if (num.empty() || r.ec != std::errc() || r.ptr != num.data() + num.size())
        fail("layer override '", item, "': '", num, "' is not a layer index");
      out.push_back({layer, k, v});
      ls = le + 1;
      if (le == layers.size()) break;
    }
    if (end == text.size()) break;
  }
  if (out.empty()) fail("layer overrides: nothing to override in '", text, "'");
  return out;
}

}  // namespace tkv::kv

namespace tkv::kv {
uint64_t rotation_seed(const KvConfig& config, int layer) {
  // splitmix64 of (seed, layer): well-mixed, different per layer.
  uint64_t z = config.seed + 0x9e3779b97f4a7c15ull * uint64_t(layer + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace tkv::kv
