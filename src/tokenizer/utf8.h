// UTF-8 helpers shared by the tokenizers, the pre-tokenizer and the stream
// decoder. Text handed to turbokv is a byte string that is *usually* UTF-8;
// every function here is total over arbitrary bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/escape.h"  // append_utf8

namespace tkv::tok {

// Length of the UTF-8 sequence announced by a lead byte, judged from its top
// four bits only (1 for ASCII and for stray continuation bytes). Exact for
// text already known to be valid UTF-8.
inline size_t utf8_len_from_lead(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

// Strict decoding of the sequence starting at s[pos]: returns its length (1-4)
// and stores the code point, or returns 0 when the bytes there are not a
// complete, well-formed sequence (stray continuation byte, bad lead byte,
// overlong form, surrogate, > U+10FFFF, or truncated by the end of s).
size_t utf8_decode(std::string_view s, size_t pos, uint32_t* cp);

// What the bytes at s[pos..] are, for a consumer that may receive more bytes
// later (the stream decoder).
enum class Utf8Prefix {
  kComplete,    // a well-formed sequence; its length is returned
  kIncomplete,  // a proper prefix of some well-formed sequence; wait for more
  kInvalid,     // s[pos] can never start a well-formed sequence here
};
Utf8Prefix utf8_classify(std::string_view s, size_t pos, size_t* len);

bool utf8_is_valid(std::string_view s);

}  // namespace tkv::tok
