// Code point ranges as UTF-8 byte patterns: [lo, hi] becomes a short list
// of byte-range sequences that together match exactly the UTF-8 encodings
// of the code points in it (surrogates D800-DFFF excluded: they are not
// valid UTF-8). This is how a character class ([a-z], [^"]) becomes a
// set of byte patterns the byte-level matcher runs (grammar.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tkv::grammar {

struct ByteRange {
  uint8_t lo = 0;
  uint8_t hi = 0;
};
using Utf8Sequence = std::vector<ByteRange>;  // 1 to 4 ranges, one per byte

// The sequences for [lo, hi] (lo <= hi <= 0x10FFFF), appended to `out`.
void append_utf8_sequences(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out);

// The UTF-8 encoding of one code point (<= 0x10FFFF) appended to `out`.
void append_utf8(uint32_t cp, std::string& out);

}  // namespace tkv::grammar
