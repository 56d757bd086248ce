// The two generation routes of the HTTP front end (http_server.h):
// POST /v1/chat/completions and POST /v1/completions, from the request body
// to a scheduler job and from its events to the response, whole or streamed.
//
// A request goes through:
//   1. parse_chat_request / parse_completion_request (api_request.h): a
//      typed request or a 400;
//   2. the prompt's token ids: chat messages rendered with the chat
//      template, then tokenized like `turbokv chat` does (BOS as the
//      vocabulary asks, special-token text parsed); completion text like
//      `turbokv run` does; completion ids as sent, checked against the
//      vocabulary. A prompt that leaves no room in the context is a 400
//      naming both numbers; max_tokens is capped by the room left;
//   3. Scheduler::submit: QueueFull and draining are 503 with Retry-After;
//   4. the events become chunks (streaming) or one body; the kDone event
//      gives usage and finish_reason, and the metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "server/api_request.h"
#include "server/http_server.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace tkv::server {

// Writes an OpenAI error object as the response (status, JSON body).
void send_api_error(httplib::Response& res, const ApiError& error);
// A 503 with Retry-After (a full queue, a drain).
void send_unavailable(httplib::Response& res, const std::string& message);

class GenerationRoutes {
 public:
  GenerationRoutes(const ServedModel& model, Scheduler& scheduler, ServerMetrics& metrics);

  // Answers one request whose whole body has been read. `close_delimited`:
  // a body that is not sent whole ends with the connection instead of being
  // chunked (HTTP/1.0).
  void handle(Endpoint endpoint, const std::string& body, httplib::Response& res,
              bool close_delimited = false);

  // POST /apply-template: a chat request's body -> {"prompt": the rendered
  // chat template}, as llama-server answers it.
  void apply_template(const std::string& body, httplib::Response& res);

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
  std::mutex mu_;
  std::condition_variable idle_cv_;
  int in_flight_ = 0;
};

}  // namespace tkv::server
