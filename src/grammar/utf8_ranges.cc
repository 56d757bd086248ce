#include "grammar/utf8_ranges.h"

#include <string>

namespace tkv::grammar {
namespace {

int encode(uint32_t cp, uint8_t* b) {
  if (cp < 0x80) {
    b[0] = uint8_t(cp);
    return 1;
  }
  if (cp < 0x800) {
    b[0] = uint8_t(0xC0 | (cp >> 6));
    b[1] = uint8_t(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    b[0] = uint8_t(0xE0 | (cp >> 12));
    b[1] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
    b[2] = uint8_t(0x80 | (cp & 0x3F));
    return 3;
  }
  b[0] = uint8_t(0xF0 | (cp >> 18));
  b[1] = uint8_t(0x80 | ((cp >> 12) & 0x3F));
  b[2] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
  b[3] = uint8_t(0x80 | (cp & 0x3F));
  return 4;
}

// [lo, hi] of one encoded length, split until every byte position is an
// independent range (the classic construction of RE2 and Rust's regex).
void split(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out) {
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= edge && edge < hi) {
      split(lo, edge, out);
      split(edge + 1, hi, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  const int n = encode(lo, a);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  encode(hi, b);
  Utf8Sequence seq(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) seq[size_t(i)] = {a[i], b[i]};
  out.push_back(std::move(seq));
}

}  // namespace

void append_utf8_sequences(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out) {
  if (hi > 0x10FFFF) hi = 0x10FFFF;
  if (lo > hi) return;
  if (lo < 0xD800 && hi >= 0xD800) {
    split(lo, 0xD7FF, out);
    if (hi > 0xDFFF) split(0xE000, hi, out);
    return;
  }
  if (lo >= 0xD800 && lo <= 0xDFFF) {
    if (hi <= 0xDFFF) return;
    lo = 0xE000;
  }
  split(lo, hi, out);
}

void append_utf8(uint32_t cp, std::string& out) {
  uint8_t b[4];
  const int n = encode(cp, b);
  out.append(reinterpret_cast<const char*>(b), size_t(n));
}

}  // namespace tkv::grammar
