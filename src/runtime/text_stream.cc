#include "runtime/text_stream.h"

#include <utility>

namespace tkv::runtime {

TextStream::TextStream(tok::StreamDecoder& decoder, std::vector<std::string> stops)
    : decoder_(decoder), matcher_(std::move(stops)) {}

std::string TextStream::push(int32_t id) {
  if (matcher_.stopped()) return {};
  return matcher_.push(decoder_.push(id));
}

std::string TextStream::flush() {
  if (matcher_.stopped()) return {};
  std::string text = matcher_.push(decoder_.flush());
  if (!matcher_.stopped()) text += matcher_.flush();
  return text;
}

}  // namespace tkv::runtime
