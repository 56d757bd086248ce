// Canonical codec names and their parser.
#include <algorithm>
#include <cctype>
#include <string>

#include "kv/codec/codec.h"

namespace tkv::kv {

std::string CodecSpec::name() const {
  switch (kind) {
    case CodecKind::F32:
      return "f32";
    case CodecKind::F16:
      return "f16";
    case CodecKind::Q8_0:
      return rotate ? "q8_0h" : "q8_0";
    case CodecKind::Q4_0:
      return rotate ? "q4_0h" : "q4_0";
    case CodecKind::TQ:
      return "tq" + std::to_string(bits) + (norm_correction ? "r" : "");
  }
  return "?";
}

std::optional<CodecSpec> parse_codec(std::string_view name) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  if (s == "f32") return CodecSpec{CodecKind::F32};
  if (s == "f16") return CodecSpec{CodecKind::F16};
  if (s == "q8_0") return CodecSpec{CodecKind::Q8_0};
  if (s == "q8_0h") return CodecSpec{CodecKind::Q8_0, 0, true};
  if (s == "q4_0") return CodecSpec{CodecKind::Q4_0};
  if (s == "q4_0h") return CodecSpec{CodecKind::Q4_0, 0, true};
  if ((s.size() == 3 || (s.size() == 4 && s[3] == 'r')) && s[0] == 't' && s[1] == 'q' &&
      s[2] >= '1' && s[2] <= '4') {
    return CodecSpec{CodecKind::TQ, s[2] - '0', true, s.size() == 4};
  }
  return std::nullopt;
}

}  // namespace tkv::kv
