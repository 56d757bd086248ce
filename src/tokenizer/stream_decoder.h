// Turns generated token ids into text as they arrive, for streaming output.
// A UTF-8 character can be split over several tokens (SPM byte fallback
// <0xE2><0x96><0x81>, or a BPE token ending mid-character), so the decoder
// holds back an incomplete tail and emits only complete characters. Bytes
// that can never become valid UTF-8 are emitted as they are once that is
// certain (and at flush), never dropped: the concatenation of everything
// push() and flush() return equals Tokenizer::decode of the same ids.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace tkv::tok {

class StreamDecoder {
 public:
  enum class Start {
    // The ids continue a text already shown (generation after a prompt):
    // every piece is emitted as is, including its leading space.
    kContinuation,
    // The ids start a text: decode()'s rules apply (a leading BOS is not
    // text; with an SPM space prefix the first piece loses one space).
    kTextStart,
  };

  explicit StreamDecoder(Tokenizer tokenizer, Start start = Start::kContinuation,
                         bool render_special = false);

  // Adds one token; returns the text completed by it (often empty).
  std::string push(int32_t id);
  // Returns everything held back (an incomplete character at the end).
  std::string flush();
  // Forgets pending bytes and starts over.
  void reset(Start start);
  size_t pending_bytes() const { return pending_.size(); }

 private:
  Tokenizer tokenizer_;
  bool render_special_;
  Start start_;
  size_t n_pushed_ = 0;
  bool strip_space_ = false;
  std::string pending_;
};

}  // namespace tkv::tok
