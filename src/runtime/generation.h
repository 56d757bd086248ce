// The generation loop of the front ends that evaluate one sequence at a
// time (`turbokv run`, `chat`, `bench`, the C and C++ APIs): sample the
// sequence's reply token by token (Sequence::sample_next: the rules of
// reply.h) and feed each token back. The server's scheduler drives the same
// Sequence calls in its batched steps.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/reply.h"
#include "runtime/sequence.h"

namespace tkv::runtime {

struct GenerateOptions {
  int64_t max_tokens = -1;  // < 0: no limit (until EOG or the context is full)
  bool stop_at_eog = true;  // false: --ignore-eos
  // More tokens that end the reply like EOG ones (a chat template's end-of-turn
  // markers); ignored with stop_at_eog = false.
  std::vector<int32_t> stop_tokens;
  const std::atomic<bool>* interrupt = nullptr;

  ReplyLimits limits() const { return {max_tokens, stop_at_eog, stop_tokens}; }
};

struct GenerateResult {
  StopReason reason = StopReason::kLength;
  int64_t n_generated = 0;         // tokens sampled and handed to on_token
  int64_t n_decoded = 0;           // tokens fed back through the model (single-token evals)
  double decode_seconds = 0;       // time in those evals
  double first_token_seconds = 0;  // from the call until the first token was handed out
};

// Samples from sequence.logits() with the sequence's sampler, hands each
// token to `on_token`, feeds it back and repeats. on_token returns false to
// stop (kStopString; that token is then not fed). An EOG token (unless
// ignored) ends the loop without being handed out or fed. Requires logits()
// and a sampler.
GenerateResult generate(Sequence& sequence, const GenerateOptions& options,
                        const std::function<bool(int32_t token)>& on_token);

struct TextGenerateResult {
  GenerateResult generation;
  std::string stop_string;  // the stop string that ended it (generation.reason kStopString)
};

// generate() as text, through the sequence's reply (started here with
// `text`, ended on return): each token's text is what the streaming
// detokenizer and the stop strings make of it; on_text receives the text
// that is safe to show and returns false to cancel (reason kCancelled; the
// token whose text it was is not fed). What the decoder and the stop
// matcher still hold is handed out at the end.
TextGenerateResult generate_text(Sequence& sequence, const GenerateOptions& options,
                                 const ReplyText& text,
                                 const std::function<bool(std::string_view text)>& on_text);

}  // namespace tkv::runtime
