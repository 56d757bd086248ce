// GPT-2's byte-level alphabet (bytes_to_unicode in openai/gpt-2 encoder.py):
// every byte 0..255 is shown as one printable code point, so a byte-level BPE
// vocabulary can spell arbitrary bytes. Printable Latin-1 bytes (! to ~,
// U+00A1 to U+00AC, U+00AE to U+00FF) stand for themselves; the other 68
// bytes, in increasing order, take U+0100, U+0101, ... (space becomes U+0120
// "Ġ", newline U+010A "Ċ").
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tkv::tok {

class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& get();

  // The code point standing for byte b, and its UTF-8 spelling.
  uint32_t code_point(uint8_t b) const { return cp_of_byte_[b]; }
  const std::string& spelling(uint8_t b) const { return utf8_of_byte_[b]; }

  // Appends the byte-level spelling of raw bytes.
  void encode(std::string_view raw, std::string& out) const;
  // The byte a code point stands for, or -1 when it is not in the alphabet.
  int byte_of(uint32_t cp) const { return cp < byte_of_cp_.size() ? byte_of_cp_[cp] : -1; }

 private:
  ByteLevelAlphabet();
  std::array<uint32_t, 256> cp_of_byte_{};
  std::array<std::string, 256> utf8_of_byte_;
  std::array<int16_t, 0x144> byte_of_cp_{};  // the alphabet ends at U+0143
};

}  // namespace tkv::tok
