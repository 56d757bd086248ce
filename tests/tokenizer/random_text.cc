#include "random_text.h"

#include <utility>

#include "tokenizer/utf8.h"

namespace tkv::tok::test {

std::string random_utf8(std::mt19937& rng, size_t max_code_points) {
  // Ranges of code points, each picked with equal probability.
  static constexpr std::pair<uint32_t, uint32_t> kRanges[] = {
      {0x20, 0x7E},        // ASCII printable
      {0x20, 0x20},        // space (runs of spaces matter to every pre-tokenizer)
      {0x09, 0x0D},        // \t \n \v \f \r
      {0x30, 0x39},        // digits
      {0xA0, 0xFF},        // Latin-1 (NBSP, accented letters)
      {0x0300, 0x036F},    // combining diacritical marks
      {0x0590, 0x06FF},    // Hebrew, Arabic
      {0x0900, 0x097F},    // Devanagari
      {0x1780, 0x17FF},    // Khmer
      {0x2000, 0x206F},    // general punctuation, Unicode spaces, ZWJ
      {0x3000, 0x303F},    // CJK punctuation, ideographic space
      {0x4E00, 0x9FFF},    // CJK ideographs
      {0xAC00, 0xD7A3},    // Hangul
      {0xFE00, 0xFE0F},    // variation selectors
      {0xFF00, 0xFFEF},    // full-width forms
      {0x1F300, 0x1FAFF},  // emoji
      {0x80, 0x10FFFF},    // anything
  };
  std::uniform_int_distribution<size_t> len_dist(0, max_code_points);
  std::uniform_int_distribution<size_t> range_dist(0, std::size(kRanges) - 1);
  std::string s;
  const size_t n = len_dist(rng);
  for (size_t i = 0; i < n; ++i) {
    const auto [lo, hi] = kRanges[range_dist(rng)];
    uint32_t cp = std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // surrogates are not characters
    append_utf8(s, cp);
  }
  return s;
}

std::string random_bytes(std::mt19937& rng, size_t max_bytes) {
  std::uniform_int_distribution<size_t> len_dist(0, max_bytes);
  std::uniform_int_distribution<int> byte_dist(0, 255);
  std::string s(len_dist(rng), '\0');
  for (char& c : s) c = char(byte_dist(rng));
  return s;
}

}  // namespace tkv::tok::test
