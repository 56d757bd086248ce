// The HTTP front end of `turbokv serve` (cpp-httplib): the OpenAI-compatible
// routes over the scheduler.
//
//   POST /v1/chat/completions   messages rendered with the chat template
//   POST /v1/completions        prompt text (BOS as `turbokv run` adds it) or ids
//   GET  /v1/models             the one served model
//   GET  /health                {"status": "ok"}; never needs the API key
//   GET  /metrics               Prometheus text (metrics.h)
//   and the routes of http_routes.h (/v1/models/{id}, /v1/responses,
//   /v1/messages, /v1/messages/count_tokens, /apply-template, /tokenize,
//   /detokenize)
//
// Both generation routes stream as server-sent events with "stream": true.
// Every error is an OpenAI error object (api_response.h error_json): 400 for
// a request turbokv cannot serve (parse errors, a prompt over the context,
// with the numbers), 501 for a chat to a model without a chat template,
// 401 without the right `Authorization: Bearer KEY` (compared in constant
// time), 404 / 405 for unknown routes and methods,
// 413 for a body over the cap (however it is framed), 415 for a multipart
// body (any other Content-Type is read as JSON), 503 with Retry-After when
// the queue is full or the server is draining, 500 for anything unexpected
// (an exception in a handler is caught and answered, never a crash).
//
// A client that goes away cancels its job: a streaming response polls the
// connection (DataSink::is_writable) while it waits for events and cancels
// the job when the socket is gone or a write fails; a non-streamed one
// does the same once its first token is out (before that its status is
// still open, so it waits in the handler).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "server/http_cors.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace tkv::server {

class DeadlineServer;  // http_connection.h

class GenerationRoutes;

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port (bind() says which)
  std::string api_key;  // empty: no key needed
  size_t max_body_bytes = size_t(8) << 20;
  // Per socket operation: a client that sends nothing (or reads nothing) for
  // this long is dropped, so an idle or stalled client cannot hold a worker.
  int read_timeout_seconds = 30;
  int write_timeout_seconds = 30;
  int keep_alive_seconds = 5;  // an idle keep-alive connection is closed after it
  // HTTP worker threads (each connection holds one while it is served); 0:
  // the scheduler's parallel + queue capacity + 4, so that every admitted or
  // queued stream has a thread and /health and /metrics still get one.
  int threads = 0;
  CorsPolicy cors;  // --cors; off by default
};

// What the routes need to know about the served model.
struct ServedModel {
  std::string id;       // the name /v1/models lists and responses carry
  int64_t created = 0;  // Unix seconds (the model file's modification time)
  const tok::Tokenizer* tokenizer = nullptr;
  // Renders chat requests; none: the model has no template and none was
  // given (--chat-template), chat requests are refused.
  std::optional<tok::ChatTemplate> chat_template;
  int64_t context = 0;    // tokens per sequence (prompt + completion)
  bool windowed = false;  // a --kv-window policy: prompts may exceed the context
};

class HttpServer {
 public:
  // `scheduler` and `metrics` outlive the server.
  HttpServer(ServedModel model, Scheduler& scheduler, ServerMetrics& metrics, HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port (the one picked for port 0).
  // tkv::Error naming the address when it cannot bind.
  int bind();
  // Accepts and serves connections until stop(); call after bind().
  void serve();
  // From now on, generation requests get 503 (the server is draining).
  void stop_admitting();
  // Waits up to `timeout` for the generation responses in flight to end.
  // True when none is left.
  bool wait_idle(std::chrono::milliseconds timeout);
  // Closes the listening socket and ends serve() once the open connections
  // are done. Callable from any thread, also before serve() has started
  // listening (serve() then returns at once).
  void stop();

  int port() const { return port_; }

 private:
  void add_routes();
  // Before a request's body is read: its framing, its key, its route and
  // method; false lets the route run.
  bool pre_route(const httplib::Request& req, httplib::Response& res);
  // The body of an error httplib answered itself (bad HTTP, a deadline,
  // headers too large), as an API error object; false keeps a handler's own.
  bool answer_error(const httplib::Request& req, httplib::Response& res);
  // The API key as a Bearer token or an x-api-key header.
  bool key_presented(const httplib::Request& req) const;

  ServedModel model_;
  Scheduler& scheduler_;
  ServerMetrics& metrics_;
  HttpOptions options_;
  std::unique_ptr<DeadlineServer> http_;
  std::unique_ptr<GenerationRoutes> generation_;
  int port_ = 0;
  int listen_socket_ = -1;  // the socket bind() made (cpp-httplib's socket_t)
  std::atomic<bool> serving_{false}, served_{false}, stopping_{false};
};

// Constant-time comparison of a presented key with the configured one (the
// time taken does not depend on where they differ).
bool keys_equal(const std::string& presented, const std::string& expected);

}  // namespace tkv::server
