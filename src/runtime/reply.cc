#include "runtime/reply.h"

#include <algorithm>
#include <utility>

namespace tkv::runtime {

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kLength:
      return "length";
    case StopReason::kEndOfText:
      return "end of text";
    case StopReason::kStopString:
      return "stop string";
    case StopReason::kContextFull:
      return "context full";
    case StopReason::kInterrupted:
      return "interrupted";
    case StopReason::kCancelled:
      return "cancelled";
  }
  return "?";
}

ReplyRules::ReplyRules(const tok::Tokenizer& tokenizer, ReplyLimits limits)
    : tokenizer_(tokenizer), limits_(std::move(limits)) {}

bool ReplyRules::limit_reached() const {
  return limits_.max_tokens >= 0 && generated_ >= limits_.max_tokens;
}

ReplyStep ReplyRules::step(sample::Sampler& sampler, std::span<const float> logits, int64_t room,
                           const TokenCheck& check) {
  ReplyStep s;
  if (limit_reached()) {
    s.stop = StopReason::kLength;
    return s;
  }
  s.token = sampler.sample(logits.data(), int(logits.size()));
  sampler.accept(s.token);
  const std::vector<int32_t>& stops = limits_.stop_tokens;
  if (limits_.stop_at_eog && (tokenizer_.is_eog(s.token) ||
                              std::find(stops.begin(), stops.end(), s.token) != stops.end())) {
    s.stop = StopReason::kEndOfText;
    return s;
  }
  ++generated_;
  s.counted = true;
  if (check) s.stop = check(s.token);
  if (s.stop) return s;
  // The last token of a length-limited reply need not be fed: nothing will
  // be sampled after it.
  if (limit_reached())
    s.stop = StopReason::kLength;
  else if (room < 1)
    s.stop = StopReason::kContextFull;
  return s;
}

Reply::Reply(const tok::Tokenizer& tokenizer, ReplyLimits limits, const ReplyText& text)
    : decoder_(tokenizer, text.start, text.render_special),
      text_(decoder_, text.stops),
      rules_(tokenizer, std::move(limits)) {
  for (int32_t id : text.spelled_after) decoder_.push(id);
}

Reply::Step Reply::step(sample::Sampler& sampler, std::span<const float> logits, int64_t room,
                        const std::function<bool(int32_t, const std::string&)>& consume) {
  Step out;
  static_cast<ReplyStep&>(out) =
      rules_.step(sampler, logits, room, [&](int32_t id) -> std::optional<StopReason> {
        out.text = text_.push(id);
        const bool cancelled = consume && !consume(id, out.text);
        // The text before a stop string was handed out: a stop string
        // that matched ends the reply as such, cancelled or not.
        if (text_.stopped()) return StopReason::kStopString;
        if (cancelled) return StopReason::kCancelled;
        return std::nullopt;
      });
  return out;
}

}  // namespace tkv::runtime
