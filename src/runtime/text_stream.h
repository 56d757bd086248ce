// Generated token ids to the text a front end may show, one token at a
// time: the streaming detokenizer (tok::StreamDecoder: text appears once
// its bytes form whole characters, spelled as in the decoded whole) followed
// by the stop strings (StopMatcher: text that could still be the start of a
// stop string is held back, and a stop string is never shown, not even
// across token boundaries). generate_text() and the server's scheduler both
// stream through it, so a reply reads the same from every front end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/stop_matcher.h"
#include "tokenizer/stream_decoder.h"

namespace tkv::runtime {

class TextStream {
 public:
  // `decoder` (the caller's: it may have seen the prompt's ids first, so the
  // continuation is spelled as in the decoded whole) must outlive the stream.
  TextStream(tok::StreamDecoder& decoder, std::vector<std::string> stops);

  // Adds one generated token; returns the text that is now safe to show
  // (often empty). Once stopped(), returns "" and ignores the token.
  std::string push(int32_t id);
  // A stop string matched: the reply ends; the text before it was returned.
  bool stopped() const { return matcher_.stopped(); }
  // The stop string that matched (empty until stopped()).
  const std::string& stop_string() const { return matcher_.matched(); }
  // End of the reply: everything still held back (an incomplete character,
  // text that could have begun a stop string), minus a stop string that the
  // held-back bytes complete.
  std::string flush();

 private:
  tok::StreamDecoder& decoder_;
  StopMatcher matcher_;
};

}  // namespace tkv::runtime
