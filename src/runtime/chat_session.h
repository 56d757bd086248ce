// A multi-turn conversation over one Sequence. Each turn feeds only
// the tokens the conversation gained since the last one (the KV cache keeps
// the history; nothing is prefilled twice), then generates the reply.
//
// What to feed is found with the chat template itself: the previous reply is
// rendered as a sentinel, and everything the template writes after the
// sentinel (its end-of-turn markers, the new user turn and the header of the
// assistant's turn) is the new text. This works for every template family
// without knowing its layout, including templates that trim message text.
//
// The reply's own tokens are already in the cache (they were fed while
// generating), except the final end-of-turn token, which comes back as the
// start of the next delta. A reply cut by a stop string, -n, or Ctrl-C keeps
// the tokens that were fed; the next turn continues after them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/generation.h"
#include "sample/sampler.h"
#include "tokenizer/chat_template.h"

namespace tkv::runtime {

struct ChatReply {
  std::string text;           // what was shown (stop strings excluded)
  int64_t prompt_tokens = 0;  // fed for this turn before generating
  double prefill_seconds = 0;
  GenerateResult generation;
  bool no_room = false;     // the turn did not fit the context: nothing was fed
  std::string stop_string;  // the stop string that ended the reply, if any
};

class ChatSession {
 public:
  // `stops`: extra stop strings (--stop), on top of the template's.
  ChatSession(Sequence& session, tok::ChatTemplate chat_template,
              const sample::SamplerConfig& sampling, std::string system_prompt,
              std::vector<std::string> stops);

  // Adds the user's message, feeds the new tokens, and streams the reply
  // through `emit` (called with text as it becomes safe to show).
  // max_tokens < 0: until an end-of-turn token, a stop string or a full context.
  ChatReply respond(const std::string& user_text, int64_t max_tokens,
                    const std::atomic<bool>* interrupt,
                    const std::function<void(const std::string&)>& emit);

  // Starts over: empty cache, only the system prompt remains.
  void clear();
  // The KV cache and the conversation (messages, token ids) to the session
  // file PATH (session_state.h); load() continues a saved conversation (same model, same KV
  // settings), tkv::Error otherwise with the current one unchanged; it
  // returns a warning for the user (e.g. another chat template) or "".
  void save(const std::string& path) const;
  std::string load(const std::string& path);

  const std::vector<tok::ChatMessage>& messages() const { return messages_; }
  const tok::ChatTemplate& chat_template() const { return template_; }
  Sequence& session() { return session_; }

  // The text to feed before the next reply, given the conversation so far
  // and the new user message (exposed for tests and --verbose).
  std::string render_delta(const std::string& user_text) const;

 private:
  Sequence& session_;
  tok::ChatTemplate template_;
  std::string system_prompt_;
  std::vector<std::string> stops_;  // template's + the user's
  std::vector<int32_t> stop_tokens_;
  std::vector<tok::ChatMessage> messages_;
};

}  // namespace tkv::runtime
