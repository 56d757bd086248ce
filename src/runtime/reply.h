// A reply being generated: the rules that end it, in one place. Every
// front end samples through Reply::step -- `turbokv run` and `chat`, the C
// and C++ APIs (generate(), generation.h) and the server's scheduler -- so a
// reply ends for the same reasons, in the same order, everywhere:
//   max_tokens already reached -> sample (the sampler accepts the token) ->
//   an end-of-generation or stop token (not counted, not shown, not fed) ->
//   the caller's look at the token (its text: a stop string, a client gone)
//   -> max_tokens reached -> no room left in the context.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/text_stream.h"
#include "sample/sampler.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace tkv::runtime {

enum class StopReason {
  kLength,       // max_tokens tokens generated
  kEndOfText,    // an end-of-generation token was sampled (not fed, not shown)
  kStopString,   // the caller's look at a token ended the reply (a stop string matched)
  kContextFull,  // no room to feed the last sampled token
  kInterrupted,  // the interrupt flag was raised (Ctrl-C)
  kCancelled,    // the consumer of the text asked to stop
};
const char* stop_reason_name(StopReason reason);

// The limits of a reply.
struct ReplyLimits {
  int64_t max_tokens = -1;  // < 0: no limit (until EOG or the context is full)
  bool stop_at_eog = true;  // false: --ignore-eos
  // More tokens that end the reply like EOG ones (a chat template's
  // end-of-turn markers); ignored with stop_at_eog = false.
  std::vector<int32_t> stop_tokens;
};

// What one step decided.
struct ReplyStep {
  int32_t token = -1;              // the sampled token (-1: the limit was reached before sampling)
  bool counted = false;            // handed to the caller's look and counted as generated
  std::optional<StopReason> stop;  // the reply ends: `token` is not to be fed
};

// The caller's look at a counted token: a reason to end the reply there, or
// none.
using TokenCheck = std::function<std::optional<StopReason>(int32_t token)>;

class ReplyRules {
 public:
  ReplyRules(const tok::Tokenizer& tokenizer, ReplyLimits limits);

  // One step from the logits after the sequence's newest token; `room` is
  // how many more tokens the sequence can take. Throws what the sampler
  // throws (bad logits), before anything changed but the sampler.
  ReplyStep step(sample::Sampler& sampler, std::span<const float> logits, int64_t room,
                 const TokenCheck& check);
  int64_t generated() const { return generated_; }
  const ReplyLimits& limits() const { return limits_; }

 private:
  bool limit_reached() const;

  const tok::Tokenizer& tokenizer_;
  ReplyLimits limits_;
  int64_t generated_ = 0;
};

// How a reply's text is made.
struct ReplyText {
  std::vector<std::string> stops;  // stop strings (never shown, the reply ends there)
  // kTextStart: the decoder sees `spelled_after` first (the prompt), so the
  // reply is spelled as in the decoded whole; kContinuation: a reply after
  // text already shown (a chat's next turn).
  tok::StreamDecoder::Start start = tok::StreamDecoder::Start::kTextStart;
  std::span<const int32_t> spelled_after;
  // Control tokens appear as their text (a reply syntax whose markers are
  // control tokens, e.g. harmony's channels, is read from the text).
  bool render_special = false;
};

// A reply of a sequence: its rules and its text (the streaming detokenizer
// and the stop strings). The sampler is the sequence's (it outlives replies:
// a chat's repetition history and random stream go on from turn to turn).
class Reply {
 public:
  Reply(const tok::Tokenizer& tokenizer, ReplyLimits limits, const ReplyText& text);
  Reply(const Reply&) = delete;
  Reply& operator=(const Reply&) = delete;

  struct Step : ReplyStep {
    std::string text;  // what is now safe to show (often empty)
  };
  // ReplyRules::step with the token's text: a stop string ends the reply
  // (kStopString); `consume` (may be empty) gets the token and its text and
  // returns false to cancel (kCancelled).
  Step step(sample::Sampler& sampler, std::span<const float> logits, int64_t room,
            const std::function<bool(int32_t token, const std::string& text)>& consume = {});
  // The end: what the decoder and the stop matcher still hold.
  std::string flush() { return text_.flush(); }
  const std::string& stop_string() const { return text_.stop_string(); }
  int64_t generated() const { return rules_.generated(); }

 private:
  tok::StreamDecoder decoder_;
  TextStream text_;
  ReplyRules rules_;
};

}  // namespace tkv::runtime
