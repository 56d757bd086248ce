#include "server/http_server.h"

#include <httplib.h>
#include <malloc.h>
#include <strings.h>
#include <sys/socket.h>

#include <cctype>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"
#include "server/api_response.h"
#include "server/http_connection.h"
#include "server/http_generation.h"
#include "server/http_routes.h"
#include "server/route_messages.h"

namespace tkv::server {
namespace {

using httplib::Request;
using httplib::Response;
using HandlerResponse = httplib::Server::HandlerResponse;

struct Route {
  const char* path;
  const char* method;
};
constexpr Route kRoutes[] = {
    {"/v1/chat/completions", "POST"},
    {"/v1/completions", "POST"},
    {"/apply-template", "POST"},
    {"/tokenize", "POST"},
    {"/detokenize", "POST"},
    {"/v1/models", "GET"},
    {"/v1/models/{id}", "GET"},
    {"/v1/responses", "POST"},
    {"/v1/messages", "POST"},
    {"/v1/messages/count_tokens", "POST"},
    {"/health", "GET"},
    {"/metrics", "GET"},
};

constexpr std::string_view kModelPrefix = "/v1/models/";

const Route* find_route(const std::string& path) {
  // "/v1/models/ID": one route (and one metrics label) whatever the id.
  const std::string_view key = path.size() > kModelPrefix.size() && path.starts_with(kModelPrefix)
                                   ? "/v1/models/{id}"
                                   : std::string_view(path);
  for (const Route& r : kRoutes)
    if (key == r.path) return &r;
  return nullptr;
}

// The metrics label of a request: its route, or "other" (so that clients
// probing random paths cannot grow the label set).
std::string endpoint_label(const std::string& path) {
  const Route* r = find_route(path);
  return r ? r->path : "other";
}

// The messages of errors httplib itself detects (before any handler runs).
std::string message_for_status(int status, const Request& req) {
  switch (status) {
    case 400:
      return "The request could not be parsed as HTTP.";
    case 404:
      return str("Unknown request URL: ", req.method, " ", req.path, ".");
    case 413:
      return "The request body is too large.";
    case 414:
      return "The request URL is too long.";
    case 415:
      return str("Unsupported Content-Type '", req.get_header_value("Content-Type"),
                 "': send the request body as JSON (Content-Type: application/json).");
    case 501:
      return str("Unsupported Transfer-Encoding '", req.get_header_value("Transfer-Encoding"),
                 "': send the body with a Content-Length, or chunked.");
    default:
      return str("HTTP error ", status, ".");
  }
}

// Whether the body is sent chunked (the one transfer coding this server
// takes off).
bool chunked(const Request& req) {
  return strcasecmp(req.get_header_value("Transfer-Encoding").c_str(), "chunked") == 0;
}
// After a large body (and its parsed JSON, freed by now) the allocator
// keeps the freed memory in the thread's arena, one arena per busy thread:
// give it back to the system, so a burst of large requests does not stay
// in the server's RSS.
void release_memory_after(size_t body_bytes) {
#if defined(__GLIBC__)
  constexpr size_t kLargeBody = size_t(1) << 20;
  if (body_bytes >= kLargeBody) malloc_trim(0);
#else
  (void)body_bytes;
#endif
}

// HTTP/1.0: no persistent connections by default, no chunked bodies.
bool http10(const Request& req) {
  return req.version == "HTTP/1.0";
}

// Why a request's body framing is ambiguous (empty: it is not): two
// Content-Length headers that differ, or one beside a Transfer-Encoding.
std::string ambiguous_framing(const Request& req) {
  const size_t lengths = req.get_header_value_count("Content-Length");
  for (size_t i = 1; i < lengths; ++i)
    if (req.get_header_value("Content-Length", i) != req.get_header_value("Content-Length", 0))
      return "The request has Content-Length headers that differ.";
  if (lengths > 0 && req.has_header("Transfer-Encoding"))
    return "The request has both a Content-Length and a Transfer-Encoding header.";
  return {};
}

// Whether a request carries a body: a Content-Length other than 0, or a
// Transfer-Encoding (chunked; any other is refused, 501). Without either it
// has none (RFC 9112 6.3).
bool carries_body(const Request& req) {
  return req.has_header("Transfer-Encoding") ||
         (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
}

// Reads a generation request's body through a content receiver instead of
// letting httplib fill req.body, for what httplib 0.11 (Debian 12's) does
// there: it caps a Content-Length body at the payload limit but lets a
// chunked one grow without bound (a client could hold gigabytes of the
// server's memory), reads and drops a declared Content-Length over the
// limit to its end, however long, and answers a form-encoded body -- curl
// -d's default Content-Type, which clients send with JSON in it -- over 8
// KiB with 413 whatever the limit. Here every body is capped at `max_bytes`
// however it is framed (a declared length over it is refused unread), and
// read as JSON whatever its Content-Type says, multipart (a file upload)
// aside: that one is read off the connection and refused with 415. Returns
// false with the response's status set (its error body comes from the
// error handler) when the body is refused or was not read whole (a client
// that ran out of time, bad chunks); the connection is then closed after
// the response, as what is left of the body cannot be told from the next
// request.
bool read_body(const Request& req, Response& res, const httplib::ContentReader& reader,
               size_t max_bytes, std::string& body) {
  if (!carries_body(req)) return true;  // (parsing "" answers: body empty)
  if (req.has_header("Transfer-Encoding") && !chunked(req)) {
    res.status = 501;  // a coding this server cannot take off (RFC 9112 6.1)
    return false;
  }
  if (!chunked(req)) {
    const std::string declared = req.get_header_value("Content-Length");
    uint64_t length = 0;
    const auto [end, error] =
        std::from_chars(declared.data(), declared.data() + declared.size(), length);
    if (error != std::errc() || end != declared.data() + declared.size()) {
      res.status = 400;
      return false;
    }
    if (length > max_bytes) {
      res.status = 413;
      return false;
    }
  }
  size_t bytes = 0;
  bool over = false;
  auto take = [&](size_t n) {
    bytes += n;
    over = over || bytes > max_bytes;
    return !over;
  };
  bool ok = false;
  if (req.is_multipart_form_data()) {
    ok = reader([](const httplib::MultipartFormData&) { return true; },
                [&](const char*, size_t n) { return take(n); });
  } else {
    ok = reader([&](const char* data, size_t n) {
      if (!take(n)) return false;
      body.append(data, n);
      return true;
    });
  }
  if (over) {
    res.status = 413;
    return false;
  }
  if (!ok) {
    // (One that ran out of time becomes a 408 in the error handler.)
    if (res.status < 400) res.status = 400;
    return false;
  }
  // The body is off the connection: it can carry the next request.
  DeadlineServer::close_after_response(false);
  if (req.is_multipart_form_data()) {
    res.status = 415;
    return false;
  }
  return true;
}

ServerGauges gauges_of(const SchedulerStats& s) {
  ServerGauges g;
  g.kv_bytes_in_use = s.kv_bytes_in_use;
  g.kv_budget_bytes = s.kv_budget;
  g.kv_shared_bytes = s.kv_shared_bytes;
  g.kv_spilled_bytes = s.kv_spilled_bytes;
  g.prefix_evictions = s.prefix_evictions;
  g.prefill_tokens = s.prompt_tokens_prefilled;
  g.kv_pages = uint64_t(s.kv_pages);
  g.sequences_active = uint64_t(s.active);
  g.requests_queued = uint64_t(s.queued);
  g.cached_prefixes_ram = uint64_t(s.cached_prefixes);
  g.cached_prefix_bytes_ram = s.cached_bytes;
  g.cached_prefixes_disk = uint64_t(s.disk_prefixes);
  g.cached_prefix_bytes_disk = s.disk_bytes;
  return g;
}

// "Bearer KEY" -> KEY (the scheme is case-insensitive); "" otherwise.
std::string bearer_token(const std::string& authorization) {
  static const std::string kScheme = "bearer ";
  if (authorization.size() < kScheme.size()) return {};
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return {};
  return authorization.substr(kScheme.size());
}

}  // namespace

bool keys_equal(const std::string& presented, const std::string& expected) {
  // Every byte of the presented key is compared (against the expected one
  // cycled), and the lengths fold into the result, so the time depends on
  // the presented length only.
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  if (expected.empty()) return presented.empty();
  for (size_t i = 0; i < presented.size(); ++i)
    diff |= static_cast<unsigned char>(presented[i] ^ expected[i % expected.size()]);
  return diff == 0;
}

HttpServer::HttpServer(ServedModel model, Scheduler& scheduler, ServerMetrics& metrics,
                       HttpOptions options)
    : model_(std::move(model)),
      scheduler_(scheduler),
      metrics_(metrics),
      options_(std::move(options)),
      http_(std::make_unique<DeadlineServer>()),
      generation_(std::make_unique<GenerationRoutes>(model_, scheduler_, metrics_)) {
  // cpp-httplib writes to sockets without MSG_NOSIGNAL: a client that
  // closes its connection mid-response must cost an EPIPE, not the process.
  std::signal(SIGPIPE, SIG_IGN);
  const int threads = options_.threads > 0
                          ? options_.threads
                          : scheduler_.options().parallel + scheduler_.options().queue_capacity + 4;
  http_->set_worker_threads(size_t(threads));
  http_->set_refusal_body([](int status) {
    return to_json_text(error_json(make_api_error(status, message_for_status(status, {}))));
  });
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(options_.read_timeout_seconds, 0);
  http_->set_write_timeout(options_.write_timeout_seconds, 0);
  http_->set_keep_alive_timeout(options_.keep_alive_seconds);
  // SO_REUSEADDR only: cpp-httplib's default also sets SO_REUSEPORT, with
  // which a second server on the same port would start and share it. The
  // socket is kept to widen its accept queue once bound (bind()).
  http_->set_socket_options([this](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_socket_ = sock;
  });
  add_routes();
}

HttpServer::~HttpServer() = default;

bool HttpServer::pre_route(const Request& req, Response& res) {
  DeadlineServer::headers_read();
  // A body is still on the connection: unless read_body reads it whole,
  // the connection closes after the response (an answer before the body,
  // or a route that takes none).
  if (carries_body(req)) DeadlineServer::close_after_response(true);
  // HTTP/1.0 has no persistent connections by default and no chunked
  // bodies: its answer ends when the connection does.
  if (http10(req)) DeadlineServer::close_after_response_always();
  if (const std::string why = ambiguous_framing(req); !why.empty()) {
    // RFC 9112 6.3: a proxy in front may have framed it otherwise
    // (request smuggling); refused, and nothing after it is read.
    DeadlineServer::close_after_response_always();
    send_api_error(res, make_api_error(400, why));
    return true;
  }
  if (options_.cors.answer_preflight(req, res)) return true;
  if (req.path != "/health" && !options_.api_key.empty() && !key_presented(req)) {
    const ApiError e = make_api_error(401,
                                      req.has_header("Authorization") || req.has_header("X-Api-Key")
                                          ? "Incorrect API key provided."
                                          : "You didn't provide an API key. Send it as "
                                            "'Authorization: Bearer KEY' or 'x-api-key: KEY'.",
                                      "", "invalid_api_key");
    if (req.path.starts_with("/v1/messages")) {
      res.status = 401;
      res.set_content(anthropic_error_text(e), "application/json");
    } else {
      send_api_error(res, e);
    }
    res.set_header("WWW-Authenticate", "Bearer");
    return true;
  }
  const Route* route = find_route(req.path);
  if (!route) {
    send_api_error(res, make_api_error(404, message_for_status(404, req), "", "unknown_url"));
    return true;
  }
  const bool head_of_get = req.method == "HEAD" && std::string(route->method) == "GET";
  if (req.method != route->method && !head_of_get) {
    send_api_error(res, make_api_error(405,
                                       str("Method ", req.method, " is not allowed for ", req.path,
                                           "; use ", route->method, "."),
                                       "", "method_not_allowed"));
    res.set_header("Allow", route->method);
    return true;
  }
  return false;
}

bool HttpServer::key_presented(const Request& req) const {
  // Bearer (OpenAI's clients) or x-api-key (Anthropic's).
  return keys_equal(bearer_token(req.get_header_value("Authorization")), options_.api_key) ||
         (req.has_header("X-Api-Key") &&
          keys_equal(req.get_header_value("X-Api-Key"), options_.api_key));
}

bool HttpServer::answer_error(const Request& req, Response& res) {
  if (DeadlineServer::head_too_large()) {
    res.status = 431;
    send_api_error(
        res, make_api_error(
                 431, str("The request's headers are too large: at most ",
                          DeadlineServer::kMaxLineBytes >> 10, " KiB a line and ",
                          DeadlineServer::kMaxHeadBytes >> 10, " KiB with the request line.")));
    return true;
  }
  if (DeadlineServer::timed_out()) {
    res.status = 408;
    const int s = options_.read_timeout_seconds;
    send_api_error(
        res, make_api_error(408, str("The request did not arrive in time: its headers are due "
                                     "within ",
                                     s, " s of its first byte, its body within ", s,
                                     " s of them plus 1 s per ",
                                     DeadlineServer::kMinBodyBytesPerSecond >> 10, " KiB.")));
    return true;
  }
  if (!res.body.empty()) return false;
  // What httplib refused itself (an unparseable request line, say): where
  // the next request would start is unknown, so none is read.
  if (res.status == 400) DeadlineServer::close_after_response_always();
  send_api_error(res, make_api_error(res.status, message_for_status(res.status, req)));
  return true;
}

void HttpServer::add_routes() {
  httplib::Server& http = *http_;

  // Before the body is read: the key, then the route and its method.
  http.set_pre_routing_handler([this](const Request& req, Response& res) {
    return pre_route(req, res) ? HandlerResponse::Handled : HandlerResponse::Unhandled;
  });

  // A route that takes a JSON body: `handle(body, res, close_delimited)`.
  auto with_body = [this](auto handle) {
    return [this, handle](const Request& req, Response& res, const httplib::ContentReader& reader) {
      size_t body_bytes = 0;
      {
        std::string body;
        if (read_body(req, res, reader, options_.max_body_bytes, body))
          handle(body, res, http10(req));
        body_bytes = body.size();
      }
      release_memory_after(body_bytes);
    };
  };
  auto generation = [this, with_body](Endpoint endpoint) {
    return with_body([this, endpoint](const std::string& body, Response& res, bool close) {
      generation_->handle(endpoint, body, res, close);
    });
  };
  http.Post("/v1/chat/completions", generation(Endpoint::kChatCompletions));
  http.Post("/v1/completions", generation(Endpoint::kCompletions));
  add_other_routes(http, *generation_, with_body);
  // While draining (SIGTERM) every route but /metrics answers 503: a load
  // balancer's health check takes the server out, clients retry elsewhere.
  http.Get("/v1/models", [this](const Request&, Response& res) {
    if (generation_->draining()) return send_unavailable(res, "The server is shutting down.");
    res.set_content(to_json_text(model_list_json({{model_.id, model_.created, "turbokv"}})),
                    "application/json");
  });
  http.Get("/health", [this](const Request&, Response& res) {
    if (generation_->draining()) {
      res.status = 503;
      res.set_header("Retry-After", "1");
      res.set_content("{\"status\":\"draining\"}", "application/json");
      return;
    }
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  http.Get("/metrics", [this](const Request&, Response& res) {
    res.set_content(render_prometheus(metrics_, gauges_of(scheduler_.stats())),
                    "text/plain; version=0.0.4; charset=utf-8");
  });

  // Statuses httplib sets itself (bad HTTP, 413, 414) get an error object
  // too; a handler's own error already has its body.
  // A request that ran out of time (http_connection.h) is a 408, and one
  // whose headers were too large a 431, whatever httplib made of what it
  // read of them.
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([this](const Request& req, Response& res) {
        return answer_error(req, res) ? HandlerResponse::Handled : HandlerResponse::Unhandled;
      }));
  // A bug must cost one request a 500, not the server.
  http.set_exception_handler([](const Request& req, Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    std::fprintf(stderr, "turbokv serve: error: %s %s: %s\n", req.method.c_str(), req.path.c_str(),
                 what.c_str());
    send_api_error(res, make_api_error(500, str("Internal server error: ", what)));
  });
  // Counted as the response's status line is about to be written (cpp-httplib
  // runs the post-routing handler for every response, errors included), not
  // in the logger, which runs after the client may already have read it: a
  // client that asks /metrics right after a response then sees it counted.
  // The same last look before the headers go out tells a client whose
  // connection closes after this response so (instead of httplib's
  // Keep-Alive).
  http.set_post_routing_handler([this](const Request& req, Response& res) {
    metrics_.count_request(endpoint_label(req.path), res.status);
    options_.cors.decorate(req, res);
    if (DeadlineServer::closes_after_response()) {
      res.headers.erase("Keep-Alive");
      res.set_header("Connection", "close");
    }
  });
}

int HttpServer::bind() {
  port_ = options_.port == 0
              ? http_->bind_to_any_port(options_.host)
              : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port_ <= 0)
    fail("cannot listen on ", options_.host, ":", options_.port,
         " (address in use, or not an address of this machine)");
  // cpp-httplib listens with a backlog of 5 connections not yet accepted:
  // of clients connecting together (8 streams of a burst, a metrics
  // scraper) the rest had their SYN dropped and retried a second later,
  // after the burst's first step had started without them. listen() again
  // on the bound socket sets the kernel's limit (net.core.somaxconn).
  if (listen_socket_ >= 0) ::listen(listen_socket_, SOMAXCONN);
  return port_;
}

void HttpServer::serve() {
  serving_.store(true);
  if (!stopping_.load()) http_->listen_after_bind();
  served_.store(true);
}

void HttpServer::stop_admitting() {
  generation_->stop_admitting();
}

bool HttpServer::wait_idle(std::chrono::milliseconds timeout) {
  return generation_->wait_idle(timeout);
}

void HttpServer::stop() {
  stopping_.store(true);
  // cpp-httplib's stop() does nothing until the listen loop runs: wait for
  // it when serve() has been called (serve() itself returns at once when it
  // starts after this point).
  while (serving_.load() && !served_.load() && !http_->is_running())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  http_->stop();
}

}  // namespace tkv::server
