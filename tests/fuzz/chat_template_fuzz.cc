// Chat templates: arbitrary template text through the family recognizer,
// then a conversation cut from the rest of the input rendered with it.
// Input: template text, a 0 byte, then messages "role\x01content\x02...".
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "fuzz_target.h"
#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t cut = in.find('\0');
  const std::string_view templ = in.substr(0, cut);
  std::string_view rest = cut == std::string_view::npos ? std::string_view() : in.substr(cut + 1);
  std::vector<tkv::tok::ChatMessage> messages;
  while (!rest.empty()) {
    const size_t end = rest.find('\x02');
    const std::string_view msg = rest.substr(0, end);
    const size_t sep = msg.find('\x01');
    messages.push_back({std::string(msg.substr(0, sep)),
                        sep == std::string_view::npos ? "" : std::string(msg.substr(sep + 1))});
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  }
  try {
    const auto t = tkv::tok::ChatTemplate::detect(templ);
    for (bool gen : {false, true}) {
      try {
        (void)t.apply(messages, gen);
      } catch (const tkv::Error&) {
      }
    }
    (void)tkv::tok::ChatTemplate::by_name(templ);
  } catch (const tkv::Error&) {
  }
  return 0;
}
