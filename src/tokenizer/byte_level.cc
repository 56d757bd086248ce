#include "tokenizer/byte_level.h"

#include "common/error.h"
#include "tokenizer/utf8.h"

namespace tkv::tok {

ByteLevelAlphabet::ByteLevelAlphabet() {
  byte_of_cp_.fill(-1);
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  uint32_t next_extra = 0x100;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = printable(b) ? uint32_t(b) : next_extra++;
    cp_of_byte_[b] = cp;
    append_utf8(utf8_of_byte_[b], cp);
    TKV_CHECK(cp < byte_of_cp_.size());
    byte_of_cp_[cp] = int16_t(b);
  }
}

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

void ByteLevelAlphabet::encode(std::string_view raw, std::string& out) const {
  for (char c : raw) out += utf8_of_byte_[static_cast<uint8_t>(c)];
}

}  // namespace tkv::tok
