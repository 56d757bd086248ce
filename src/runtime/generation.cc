#include "runtime/generation.h"

#include "common/error.h"
#include "common/timer.h"

namespace tkv::runtime {

namespace {

// The loop both variants share: `step` samples one token (a ReplyStep),
// the loop feeds it back until a step stops or the interrupt is raised.
template <typename Step>
GenerateResult run_loop(Sequence& sequence, const GenerateOptions& options, Step&& step) {
  TKV_CHECK(!sequence.logits().empty());
  GenerateResult result;
  const Stopwatch total;
  while (true) {
    if (options.interrupt && options.interrupt->load()) {
      result.reason = StopReason::kInterrupted;
      break;
    }
    const ReplyStep s = step(sequence.logits());
    if (s.counted && ++result.n_generated == 1) result.first_token_seconds = total.seconds();
    if (s.stop) {
      result.reason = *s.stop;
      break;
    }
    const Stopwatch feed;
    const int32_t one[1] = {s.token};
    sequence.feed(one);
    result.decode_seconds += feed.seconds();
    ++result.n_decoded;
  }
  return result;
}

}  // namespace

GenerateResult generate(Sequence& sequence, const GenerateOptions& options,
                        const std::function<bool(int32_t token)>& on_token) {
  ReplyRules rules(sequence.tokenizer(), options.limits());
  const TokenCheck check = [&](int32_t id) -> std::optional<StopReason> {
    if (!on_token(id)) return StopReason::kStopString;
    return std::nullopt;
  };
  return run_loop(sequence, options, [&](std::span<const float> logits) {
    return rules.step(sequence.sampler(), logits, sequence.room(), check);
  });
}

TextGenerateResult generate_text(Sequence& sequence, const GenerateOptions& options,
                                 const ReplyText& text,
                                 const std::function<bool(std::string_view text)>& on_text) {
  Reply& reply = sequence.start_reply(options.limits(), text);
  TextGenerateResult out;
  const auto consume = [&](int32_t, const std::string& piece) {
    return piece.empty() || on_text(piece);
  };
  out.generation = run_loop(sequence, options, [&](std::span<const float> logits) {
    return ReplyStep(sequence.sample_next(logits, consume));
  });
  // The rest is handed out unless the consumer cancelled: nothing more is
  // generated, whatever on_text answers now.
  if (out.generation.reason != StopReason::kCancelled) {
    if (const std::string rest = reply.flush(); !rest.empty()) on_text(rest);
    out.stop_string = reply.stop_string();
  }
  sequence.end_reply();
  return out;
}

}  // namespace tkv::runtime
