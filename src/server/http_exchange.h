// One generation response in flight: the scheduler's events of a request's
// jobs (one per prompt, each with its choices) gathered per choice and
// written, whole or as server-sent events, in the shape a ReplyFormat
// gives them (OpenAI chat and completions here; the Responses and Anthropic
// Messages routes have their own formats).
//
// The connection is watched while the jobs run: a client that went away
// cancels them (the destructor), and one that half-closed its sending side
// is sent one byte that changes nothing for a client still there (a space
// before a JSON body, an empty comment line between events) to tell.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat_output/reply_syntax.h"
#include "server/api_response.h"
#include "server/http_generation.h"
#include "server/scheduler.h"

namespace httplib {
struct Response;
class DataSink;
}  // namespace httplib

namespace tkv::server {

// What one choice brought so far, and how it ended.
struct ChoiceState {
  int index = 0;
  std::string text;          // the whole reply so far (its content, when parsed)
  std::string pending_text;  // not yet streamed
  // A chat reply read by its template's syntax (reply_reading.h): the
  // parser, the reasoning and the tool calls so far; null for plain text.
  std::unique_ptr<chat::ReplyParser> parser;
  std::string reasoning, pending_reasoning;
  std::vector<ToolCallOut> calls;
  size_t calls_sent = 0;
  int64_t text_sent = 0;
  int64_t prompt_bytes = 0;  // completions: starts text_offset
  std::vector<TokenLogprob> pending_logprobs, logprobs;
  bool opened = false;  // the format's per-choice opening was streamed
  bool done = false;    // its kDone arrived
  bool closed = false;  // its last piece was streamed
  Event done_event;
};

// How a route writes its replies. Streamed pieces are whole SSE events
// ("data: ...\n\n", or "event: NAME\ndata: ...\n\n"), possibly several.
class ReplyFormat {
 public:
  virtual ~ReplyFormat() = default;
  // The request's prompt tokens, known once it is accepted (before any
  // piece).
  virtual void prepared(int64_t prompt_tokens) { (void)prompt_tokens; }
  // Before a choice's first piece (chat: the role chunk).
  virtual std::string open_choice(const ChoiceState& choice) = 0;
  // A choice's next text; piece.finish_reason set on its last.
  virtual std::string piece(const StreamPiece& piece) = 0;
  // After every choice ended: the usage (when asked) and the terminator.
  virtual std::string close(const std::vector<ChoiceState>& choices, const Usage& usage) = 0;
  // An error after the stream started, then the terminator.
  virtual std::string stream_error(const ApiError& error) = 0;
  // The whole body of a finished request.
  virtual Json whole(const std::vector<ChoiceState>& choices, const Usage& usage) = 0;
  // An error object of this route's shape.
  virtual Json error(const ApiError& error) { return error_json(error); }
  // Whether pieces carry logprobs.
  virtual bool logprobs() const { return false; }
  // Whether this format carries reasoning and tool calls (replies are then
  // read by the template's syntax when the request has one).
  virtual bool reads_reply_syntax() const { return false; }
};

FinishReason api_finish(JobFinish finish);
// A choice's finish_reason: "tool_calls" for a reply that stopped with
// tool calls, else api_finish of how its job ended.
FinishReason choice_finish(const ChoiceState& choice);

// How the choices' replies are parsed (reply_reading.h): `make` gives each
// choice its parser (empty: replies are plain text); `tools` is the syntax
// whose tool-call ids the calls get.
struct ReplyParsing {
  std::function<std::unique_ptr<chat::ReplyParser>()> make;
  chat::ToolSyntax tools = chat::ToolSyntax::kNone;
};

// The OpenAI chat and completions formats (api_response.h).
std::unique_ptr<ReplyFormat> openai_format(Endpoint endpoint, ResponseMeta meta, bool logprobs,
                                           bool include_usage);

class Exchange {
 public:
  // `prompt_bytes`: per job of the request (one per prompt), the prompt's
  // bytes (completions' text_offset); each job has `choices_per_job`
  // choices (n), job i's choice j numbered i * n + j.
  Exchange(GenerationRoutes& routes, std::shared_ptr<JobStream> stream,
           std::unique_ptr<ReplyFormat> format, int choices_per_job,
           const std::vector<int64_t>& prompt_bytes, ReplyParsing parsing = {});
  ~Exchange();  // cancels the jobs when they did not end (client gone)
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  bool done() const { return remaining_ == 0; }
  // Waits for the next event (up to the poll interval); false on timeout.
  bool poll();
  // One call of the chunked content provider of a stream.
  bool pump_stream(httplib::DataSink& sink);
  // The body (or error) once the jobs are done.
  void respond_whole(httplib::Response& res);
  // The content provider of a whole body whose jobs are still running.
  bool pump_whole(httplib::DataSink& sink);
  // A job stopped for a reason that is not the request's answer.
  bool failed() const;

 private:
  bool client_there(httplib::DataSink& sink, const char* probe);
  bool connection_checked_recently();
  void take(Event event);
  void add_text(ChoiceState& c, const std::string& text, bool last);
  void record_metrics(const Event& e, bool first_of_job);
  TokenLogprob token_logprob(const GeneratedToken& t) const;
  Usage usage() const;
  ApiError job_error() const;
  bool flush_choice(ChoiceState& c, httplib::DataSink& sink);
  static bool write(httplib::DataSink& sink, const std::string& data);

  GenerationRoutes::InFlight in_flight_;
  GenerationRoutes& routes_;
  std::shared_ptr<JobStream> stream_;
  std::unique_ptr<ReplyFormat> format_;
  int per_job_;
  chat::ToolSyntax call_syntax_;
  std::vector<ChoiceState> choices_;
  int remaining_;
  bool probed_ = false;
  bool seen_tokens_ = false;
  std::chrono::steady_clock::time_point last_event_, last_check_;
};

}  // namespace tkv::server
