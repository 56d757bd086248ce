// Stop strings for streamed text: `chat --stop STR` and the chat template's
// end-of-turn markers when the model writes them as plain text. Text is
// pushed as it is decoded; whatever could still be the start of a stop
// string is held back, so a stop string is never shown, not even partially.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tkv::runtime {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Adds decoded text; returns the text that is now safe to show. After a
  // stop string is found, returns the text before it and stopped() is true;
  // anything after it is dropped.
  std::string push(std::string_view text);
  // End of the reply without a stop: the held-back text.
  std::string flush();
  bool stopped() const { return stopped_; }
  // Which stop string matched (empty until stopped()).
  const std::string& matched() const { return matched_; }
  void reset();

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace tkv::runtime
