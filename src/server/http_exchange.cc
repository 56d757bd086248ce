#include "server/http_exchange.h"

#include <httplib.h>

#include <utility>

#include "common/error.h"
#include "server/http_connection.h"
#include "server/reply_reading.h"

namespace tkv::server {
namespace {

using Clock = std::chrono::steady_clock;

// How long a response waits for the next event before it looks at its
// connection again: a client that went away is noticed within this.
constexpr std::chrono::milliseconds kPollInterval{200};

// Bytes that change nothing for a client still there (see the header).
constexpr const char* kWholeProbe = " ";
constexpr const char* kStreamProbe = ":\n";

class OpenAIFormat : public ReplyFormat {
 public:
  OpenAIFormat(Endpoint endpoint, ResponseMeta meta, bool logprobs, bool include_usage)
      : chat_(endpoint == Endpoint::kChatCompletions),
        meta_(std::move(meta)),
        logprobs_(logprobs),
        include_usage_(include_usage) {}

  std::string open_choice(const ChoiceState& c) override {
    if (!chat_) return {};
    StreamPiece role;
    role.index = c.index;
    role.first = true;
    return sse_event(chat_chunk_json(meta_, role, include_usage_));
  }
  std::string piece(const StreamPiece& p) override {
    return sse_event(chat_ ? chat_chunk_json(meta_, p, include_usage_)
                           : completion_chunk_json(meta_, p, include_usage_));
  }
  std::string close(const std::vector<ChoiceState>&, const Usage& usage) override {
    std::string out;
    if (include_usage_)
      out = sse_event(chat_ ? chat_usage_chunk_json(meta_, usage)
                            : completion_usage_chunk_json(meta_, usage));
    return out + std::string(sse_done());
  }
  std::string stream_error(const ApiError& e) override {
    // The status line is long gone: the error goes in the stream, as
    // OpenAI sends errors that happen mid-stream.
    return sse_event(error_json(e)) + std::string(sse_done());
  }
  Json whole(const std::vector<ChoiceState>& states, const Usage& usage) override {
    std::vector<CompletionChoice> choices;
    for (const ChoiceState& s : states) {
      CompletionChoice c;
      c.index = s.index;
      c.text = s.text;
      c.reasoning = s.reasoning;
      c.tool_calls = s.calls;
      c.finish_reason = choice_finish(s);
      c.logprobs_requested = logprobs_;
      c.logprobs = s.logprobs;
      c.prompt_bytes = s.prompt_bytes;
      choices.push_back(std::move(c));
    }
    return chat_ ? chat_completion_json(meta_, choices, usage)
                 : text_completion_json(meta_, choices, usage);
  }
  bool logprobs() const override { return logprobs_; }
  bool reads_reply_syntax() const override { return chat_; }

 private:
  bool chat_;
  ResponseMeta meta_;
  bool logprobs_, include_usage_;
};

}  // namespace

FinishReason api_finish(JobFinish finish) {
  return finish == JobFinish::kStop ? FinishReason::kStop : FinishReason::kLength;
}

FinishReason choice_finish(const ChoiceState& choice) {
  const FinishReason f = api_finish(choice.done_event.finish);
  return f == FinishReason::kStop && !choice.calls.empty() ? FinishReason::kToolCalls : f;
}

std::unique_ptr<ReplyFormat> openai_format(Endpoint endpoint, ResponseMeta meta, bool logprobs,
                                           bool include_usage) {
  return std::make_unique<OpenAIFormat>(endpoint, std::move(meta), logprobs, include_usage);
}

Exchange::Exchange(GenerationRoutes& routes, std::shared_ptr<JobStream> stream,
                   std::unique_ptr<ReplyFormat> format, int choices_per_job,
                   const std::vector<int64_t>& prompt_bytes, ReplyParsing parsing)
    : in_flight_(routes),
      routes_(routes),
      stream_(std::move(stream)),
      format_(std::move(format)),
      per_job_(choices_per_job),
      call_syntax_(parsing.tools),
      last_event_(Clock::now()),
      last_check_(Clock::now()) {
  for (size_t job = 0; job < prompt_bytes.size(); ++job)
    for (int c = 0; c < per_job_; ++c) {
      ChoiceState s;
      s.index = int(job) * per_job_ + c;
      s.prompt_bytes = prompt_bytes[job];
      if (parsing.make) s.parser = parsing.make();
      choices_.push_back(std::move(s));
    }
  remaining_ = int(choices_.size());
}

Exchange::~Exchange() {
  if (!done()) stream_->cancel();
}

bool Exchange::poll() {
  std::optional<Event> event = stream_->next(kPollInterval);
  if (!event) return false;
  take(std::move(*event));
  return true;
}

bool Exchange::failed() const {
  for (const ChoiceState& c : choices_)
    if (c.done &&
        (c.done_event.finish == JobFinish::kError || c.done_event.finish == JobFinish::kCancelled))
      return true;
  return false;
}

bool Exchange::flush_choice(ChoiceState& c, httplib::DataSink& sink) {
  if (c.closed) return true;
  if (!c.opened) {
    c.opened = true;
    if (const std::string open = format_->open_choice(c); !open.empty() && !write(sink, open))
      return false;
  }
  const bool finishing = c.done && !failed();
  if (c.pending_text.empty() && c.pending_reasoning.empty() && c.calls_sent == c.calls.size() &&
      c.pending_logprobs.empty() && !finishing)
    return true;
  StreamPiece piece;
  piece.index = c.index;
  piece.text = std::move(c.pending_text);
  piece.reasoning = std::move(c.pending_reasoning);
  c.pending_reasoning.clear();
  piece.first_call = int(c.calls_sent);
  piece.calls.assign(c.calls.begin() + std::ptrdiff_t(c.calls_sent), c.calls.end());
  c.calls_sent = c.calls.size();
  piece.logprobs_requested = format_->logprobs();
  piece.logprobs = std::move(c.pending_logprobs);
  piece.text_offset_start = c.prompt_bytes + c.text_sent;
  c.pending_text.clear();
  c.pending_logprobs.clear();
  c.text_sent += int64_t(piece.text.size());
  if (finishing) {
    piece.finish_reason = choice_finish(c);
    c.closed = true;
  }
  return write(sink, format_->piece(piece));
}

bool Exchange::pump_stream(httplib::DataSink& sink) {
  if (!done() && !poll()) {
    // Nothing new yet; the choices still open their stream at once.
    for (ChoiceState& c : choices_)
      if (!c.opened && !flush_choice(c, sink)) return false;
    return client_there(sink, kStreamProbe);
  }
  if (!connection_checked_recently() && !client_there(sink, kStreamProbe)) return false;
  for (ChoiceState& c : choices_)
    if (!flush_choice(c, sink)) return false;
  if (!done()) return true;
  const std::string end =
      failed() ? format_->stream_error(job_error()) : format_->close(choices_, usage());
  if (!write(sink, end)) return false;
  sink.done();
  return true;
}

void Exchange::respond_whole(httplib::Response& res) {
  if (failed()) {
    const ApiError e = job_error();
    res.status = e.status;
    res.set_content(to_json_text(format_->error(e)), "application/json");
    return;
  }
  res.status = 200;
  res.set_content(to_json_text(format_->whole(choices_, usage())), "application/json");
}

bool Exchange::pump_whole(httplib::DataSink& sink) {
  while (!done()) {
    if ((!poll() || !connection_checked_recently()) && !client_there(sink, kWholeProbe))
      return false;
  }
  // The status (200) is already out: a job that failed now can only say so
  // in the body.
  const std::string body =
      to_json_text(failed() ? format_->error(job_error()) : format_->whole(choices_, usage()));
  if (!write(sink, body)) return false;
  sink.done();
  return true;
}

bool Exchange::client_there(httplib::DataSink& sink, const char* probe) {
  if (!sink.is_writable()) return false;
  if (probed_ || !DeadlineServer::peer_input_ended()) return true;
  probed_ = true;
  return write(sink, probe);
}

// False at most every kPollInterval: then the caller looks at the
// connection (events can keep coming for a client that is gone).
bool Exchange::connection_checked_recently() {
  const Clock::time_point now = Clock::now();
  if (now - last_check_ < kPollInterval) return true;
  last_check_ = now;
  return false;
}

void Exchange::take(Event event) {
  if (event.choice < 0 || event.choice >= int(choices_.size()))
    fail("exchange: event of choice ", event.choice, " outside ", choices_.size(), " choices");
  ChoiceState& c = choices_[size_t(event.choice)];
  if (event.kind == Event::Kind::kDone) {
    add_text(c, event.text, /*last=*/true);
    c.done = true;
    --remaining_;
    record_metrics(event, event.choice % per_job_ == 0);
    c.done_event = std::move(event);
    return;
  }
  add_text(c, event.text, /*last=*/false);
  if (!event.tokens.empty()) {
    // Counted as they come, so that a request cancelled half-way counts
    // what it cost.
    routes_.metrics().add_generated_tokens(event.tokens.size());
    // Inter-token latency: the time since the previous tokens, spread over
    // the tokens this event brings.
    const Clock::time_point now = Clock::now();
    if (seen_tokens_) {
      const double gap = std::chrono::duration<double>(now - last_event_).count();
      for (size_t i = 0; i < event.tokens.size(); ++i)
        routes_.metrics().observe_per_token(gap / double(event.tokens.size()));
    }
    seen_tokens_ = true;
    last_event_ = now;
  }
  if (format_->logprobs())
    for (const GeneratedToken& t : event.tokens) {
      TokenLogprob entry = token_logprob(t);
      c.pending_logprobs.push_back(entry);
      c.logprobs.push_back(std::move(entry));
    }
}

// Text as it comes, or what the choice's parser makes of it (the rest it
// holds at the end).
void Exchange::add_text(ChoiceState& c, const std::string& text, bool last) {
  if (!c.parser) {
    c.pending_text += text;
    c.text += text;
    return;
  }
  chat::ReplyDelta d = c.parser->feed(text);
  if (last) d.append(c.parser->finish());
  c.pending_text += d.content;
  c.text += d.content;
  c.pending_reasoning += d.reasoning;
  c.reasoning += d.reasoning;
  for (chat::ToolCall& call : d.calls)
    c.calls.push_back({.id = tool_call_id(call_syntax_),
                       .name = std::move(call.name),
                       .arguments = std::move(call.arguments)});
}

TokenLogprob Exchange::token_logprob(const GeneratedToken& t) const {
  const tok::Tokenizer& tokenizer = *routes_.model().tokenizer;
  TokenLogprob entry;
  entry.token = tokenizer.token_to_piece(t.token, /*render_special=*/true);
  entry.logprob = t.logprob;
  for (const auto& alt : t.top)
    entry.top.push_back({tokenizer.token_to_piece(alt.token, true), alt.logprob});
  return entry;
}

// A job's prompt is counted once, by its first choice.
void Exchange::record_metrics(const Event& e, bool first_of_job) {
  if (!first_of_job) return;
  ServerMetrics& m = routes_.metrics();
  if (e.cached_tokens > 0) m.add_prefix_cache_hit(uint64_t(e.cached_tokens));
  m.observe_queue_wait(e.timings.queued_seconds);
  if (e.completion_tokens > 0) m.observe_ttft(e.timings.first_token_seconds);
}

Usage Exchange::usage() const {
  Usage u;
  for (const ChoiceState& c : choices_) {
    if (c.index % per_job_ == 0) {
      u.prompt_tokens += c.done_event.prompt_tokens;
      u.cached_tokens += c.done_event.cached_tokens;
    }
    u.completion_tokens += c.done_event.completion_tokens;
  }
  return u;
}

ApiError Exchange::job_error() const {
  for (const ChoiceState& c : choices_) {
    const Event& e = c.done_event;
    if (!c.done || (e.finish != JobFinish::kError && e.finish != JobFinish::kCancelled)) continue;
    if (e.finish == JobFinish::kCancelled)
      return make_api_error(503, "The server is shutting down; the request was cancelled.");
    if (e.budget_error)
      return make_api_error(400,
                            str("The request does not fit the server's KV cache budget: ", e.error),
                            "", "kv_budget_exceeded");
    return make_api_error(500, str("The generation failed: ", e.error));
  }
  return make_api_error(500, "The generation failed.");
}

bool Exchange::write(httplib::DataSink& sink, const std::string& data) {
  return data.empty() || sink.write(data.data(), data.size());
}

}  // namespace tkv::server
