#include "tokenizer/utf8.h"

namespace tkv::tok {

namespace {

bool is_continuation(uint8_t b) {
  return (b & 0xC0) == 0x80;
}

// The range the second byte must fall in for a given lead byte (RFC 3629,
// Table 3-7 of the Unicode standard). This is what excludes overlong forms,
// surrogates and code points above U+10FFFF.
bool second_byte_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return is_continuation(b);
  }
}

// Expected total length for a lead byte, 0 if it can never start a sequence.
size_t expected_len(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;  // continuation byte or overlong 2-byte lead
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

}  // namespace

Utf8Prefix utf8_classify(std::string_view s, size_t pos, size_t* len) {
  const auto lead = static_cast<uint8_t>(s[pos]);
  const size_t need = expected_len(lead);
  if (need == 0) return Utf8Prefix::kInvalid;
  const size_t avail = s.size() - pos;
  for (size_t i = 1; i < need; ++i) {
    if (i >= avail) return Utf8Prefix::kIncomplete;
    const auto b = static_cast<uint8_t>(s[pos + i]);
    if (!(i == 1 ? second_byte_ok(lead, b) : is_continuation(b))) return Utf8Prefix::kInvalid;
  }
  *len = need;
  return Utf8Prefix::kComplete;
}

size_t utf8_decode(std::string_view s, size_t pos, uint32_t* cp) {
  size_t len = 0;
  if (utf8_classify(s, pos, &len) != Utf8Prefix::kComplete) return 0;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data() + pos);
  switch (len) {
    case 1:
      *cp = p[0];
      break;
    case 2:
      *cp = (uint32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
      break;
    case 3:
      *cp = (uint32_t(p[0] & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
      break;
    default:
      *cp = (uint32_t(p[0] & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) |
            (uint32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  }
  return len;
}

bool utf8_is_valid(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<uint8_t>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t len = 0;
    if (utf8_classify(s, pos, &len) != Utf8Prefix::kComplete) return false;
    pos += len;
  }
  return true;
}

}  // namespace tkv::tok
