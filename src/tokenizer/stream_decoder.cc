#include "tokenizer/stream_decoder.h"

#include "tokenizer/utf8.h"

namespace tkv::tok {

StreamDecoder::StreamDecoder(Tokenizer tokenizer, Start start, bool render_special)
    : tokenizer_(std::move(tokenizer)), render_special_(render_special) {
  reset(start);
}

void StreamDecoder::reset(Start start) {
  start_ = start;
  n_pushed_ = 0;
  strip_space_ = start == Start::kTextStart && tokenizer_.add_space_prefix();
  pending_.clear();
}

std::string StreamDecoder::push(int32_t id) {
  const std::string& piece = tokenizer_.token_to_piece(id, render_special_);
  const bool leading_bos = start_ == Start::kTextStart && n_pushed_ == 0 && id == tokenizer_.bos();
  ++n_pushed_;
  size_t skip = 0;
  if (!leading_bos) {
    // Same rule as Tokenizer::decode: only the first text token loses a space.
    if (strip_space_ && !piece.empty() && piece[0] == ' ') skip = 1;
    strip_space_ = false;
  }
  pending_.append(piece, skip);

  // Emit up to the first character that may still be completed by later bytes.
  size_t ready = 0;
  while (ready < pending_.size()) {
    if (static_cast<uint8_t>(pending_[ready]) < 0x80) {
      ++ready;
      continue;
    }
    size_t len = 0;
    const Utf8Prefix kind = utf8_classify(pending_, ready, &len);
    if (kind == Utf8Prefix::kIncomplete) break;
    ready += kind == Utf8Prefix::kComplete ? len : 1;  // an invalid byte goes out as is
  }
  std::string out = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace tkv::tok
