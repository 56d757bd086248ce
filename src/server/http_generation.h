// The generation routes of the HTTP front end (http_server.h):
// POST /v1/chat/completions and POST /v1/completions, from the request body
// to scheduler jobs and from their events to the response, whole or
// streamed; the Responses and Messages routes (route_*.h) convert their
// bodies into the same GenerationRequest and run through serve().
//
// A request goes through:
//   1. parse_chat_request / parse_completion_request (api_request.h): a
//      typed request or a 400;
//   2. the prompts' token ids: chat messages rendered with the chat
//      template, then tokenized like `turbokv chat` does (BOS as the
//      vocabulary asks, special-token text parsed); completion text like
//      `turbokv run` does; completion ids as sent, checked against the
//      vocabulary. A prompt that leaves no room in the context is a 400
//      naming both numbers; max_tokens is capped by the room left; a
//      logit_bias id outside the vocabulary is a 400;
//   3. one job per prompt, each with the request's n choices (job i's
//      choice j is choice i * n + j and samples with seed + i * n + j),
//      submitted together: QueueFull and draining are 503 with Retry-After;
//      a request's grammar (structured_output.h), compiled once, gives each
//      choice its own constraint (its own grammar state) over the shared
//      vocabulary trie;
//   4. the events become chunks (streaming) or one body in the route's
//      format (http_exchange.h); the kDone events give usage (each prompt
//      counted once) and finish_reason, and the metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <variant>

#include "server/api_request.h"
#include "server/http_server.h"
#include "server/scheduler.h"
#include "server/structured_output.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace tkv::server {

// Writes an OpenAI error object as the response (status, JSON body).
void send_api_error(httplib::Response& res, const ApiError& error);
// A 503 with Retry-After (a full queue, a drain).
void send_unavailable(httplib::Response& res, const std::string& message);

class ReplyFormat;

// The response header that says a request field was accepted but had no
// effect (a reasoning effort the chat template does not read).
inline constexpr const char* kWarningHeader = "X-Turbokv-Warning";

// The 501 of a chat request (any route) to a model that has no chat
// template, none given with --chat-template.
ApiError no_chat_template();
// The chat template's variables besides messages and add_generation_prompt:
// the request's chat_template_kwargs, and reasoning_effort when the request
// sets it (gpt-oss's template reads it; a chat_template_kwargs entry of
// that name wins).
nlohmann::ordered_json template_variables(const GenerationRequest& request);
// Sets kWarningHeader when the request sets a reasoning effort (`field`
// names it in the message) that the model's chat template never reads.
void warn_unread_effort(const GenerationRequest& request, const ServedModel& model,
                        const char* field, httplib::Response& res);

class GenerationRoutes {
 public:
  GenerationRoutes(const ServedModel& model, Scheduler& scheduler, ServerMetrics& metrics);

  // Answers one request whose whole body has been read. `close_delimited`:
  // a body that is not sent whole ends with the connection instead of being
  // chunked (HTTP/1.0).
  void handle(Endpoint endpoint, const std::string& body, httplib::Response& res,
              bool close_delimited = false);

  // Runs a parsed request (chat: its messages; completions: its prompts,
  // each a job with request.n choices) and answers it in `format`'s shape
  // (other routes convert their bodies into a GenerationRequest and bring
  // their own format). Errors before the reply starts are `format`'s error
  // objects.
  void serve(const GenerationRequest& request, std::unique_ptr<ReplyFormat> format,
             httplib::Response& res, bool close_delimited);
  static void send_error(httplib::Response& res, ReplyFormat& format, const ApiError& error);
  uint64_t next_id() { return next_id_.fetch_add(1); }
  // The tokens of a chat request's rendered prompt (count_tokens), or the
  // 400 its prompt would get.
  std::variant<int64_t, ApiError> count_prompt_tokens(const GenerationRequest& request) const;

  void stop_admitting() { draining_.store(true); }
  bool draining() const { return draining_.load(); }
  bool wait_idle(std::chrono::milliseconds timeout);

  // Counts a response in flight from handle() until its content is sent (or
  // its connection gone); wait_idle() waits for the count to reach 0.
  class InFlight {
   public:
    explicit InFlight(GenerationRoutes& routes);
    ~InFlight();
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    GenerationRoutes& routes_;
  };

  const ServedModel& model() const { return model_; }
  ServerMetrics& metrics() { return metrics_; }

 private:
  const ServedModel& model_;
  Scheduler& scheduler_;
  ServerMetrics& metrics_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_id_;
  TokenTrieCache tries_;  // the vocabulary's token trie, for grammars
  std::mutex mu_;
  std::condition_variable idle_cv_;
  int in_flight_ = 0;
};

}  // namespace tkv::server
