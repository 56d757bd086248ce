// The HTTP front end (server/http_server.h) in process, on stories260K,
// driven with httplib::Client over loopback: routes, the API key, error
// objects for every status, the context check, whole and streamed
// responses, a client that goes away, the queue and the drain. (The
// end-to-end tests with the official openai client are in node/.)
#include "server/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "live_server.h"
#include "scheduler_test_util.h"
#include "test_util.h"

namespace tkv::server {
namespace {

using Json = nlohmann::json;

using test::auth;
using test::expect_error;
using test::HttpServerSlowTest;
using test::HttpServerTest;
using test::kKey;
using test::LiveServer;
using test::Options;

TEST(KeysEqual, ExactMatchOnly) {
  EXPECT_TRUE(keys_equal("sk-abc", "sk-abc"));
  EXPECT_FALSE(keys_equal("sk-abd", "sk-abc"));
  EXPECT_FALSE(keys_equal("sk-ab", "sk-abc"));
  EXPECT_FALSE(keys_equal("sk-abcd", "sk-abc"));
  EXPECT_FALSE(keys_equal("", "sk-abc"));
  EXPECT_FALSE(keys_equal("sk-abcsk-abc", "sk-abc"));  // the expected key cycled
  EXPECT_TRUE(keys_equal("", ""));
}

TEST_F(HttpServerTest, HealthNeedsNoKeyTheRestDoes) {
  LiveServer server(*model_);
  httplib::Client c = server.client();
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(Json::parse(health->body), Json({{"status", "ok"}}));

  expect_error(c.Get("/v1/models"), 401);
  expect_error(c.Get("/metrics"), 401);
  expect_error(c.Get("/v1/models", auth("sk-test-kez")), 401);
  expect_error(c.Get("/v1/models", {{"Authorization", std::string("Basic ") + kKey}}), 401);
  expect_error(c.Post("/v1/completions", "{\"prompt\": \"x\"}", "application/json"), 401);

  auto models = c.Get("/v1/models", auth());
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  EXPECT_EQ(Json::parse(models->body)["data"][0]["id"], "stories260K");
  auto metrics = c.Get("/metrics", auth());
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("turbokv_requests_total{endpoint=\"/v1/models\",code=\"401\"} 3"),
            std::string::npos)
      << metrics->body;
  // The scheme name is case-insensitive.
  auto lower = c.Get("/v1/models", {{"Authorization", std::string("bearer ") + kKey}});
  ASSERT_TRUE(lower);
  EXPECT_EQ(lower->status, 200);
}

// A second HTTP front end on `server`'s scheduler, with its own metrics,
// for `port` (0: any free one); not bound until bind().
struct SecondServer {
  static ServedModel served(const test::LoadedModel& m) {
    ServedModel s;
    s.tokenizer = m.tokenizer.get();
    s.context = 256;
    return s;
  }
  static HttpOptions on_port(int port) {
    HttpOptions h;
    h.port = port;
    return h;
  }
  SecondServer(const test::LoadedModel& m, LiveServer& server, int port)
      : http(served(m), server.scheduler(), metrics, on_port(port)) {}
  ServerMetrics metrics;
  HttpServer http;
};

TEST_F(HttpServerTest, APortInUseIsAnError) {
  LiveServer server(*model_);
  SecondServer second(*model_, server, server.port());
  try {
    second.http.bind();
    ADD_FAILURE() << "a second server bound port " << server.port();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(server.port())), std::string::npos)
        << e.what();
  }
}

// The address of `port` on this machine's loopback interface.
sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

// Clients that connect together all get through the handshake even before
// any is accepted: the listening socket's queue is not cpp-httplib's 5
// (where the sixth client's SYN was dropped and retried a second later).
TEST_F(HttpServerTest, ConnectionsArrivingTogetherAllComplete) {
  LiveServer server(*model_);
  SecondServer idle(*model_, server, 0);  // bound, never serving
  const int port = idle.http.bind();
  constexpr int kClients = 32;
  std::vector<int> fds;
  for (int i = 0; i < kClients; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ASSERT_GE(fd, 0);
    const sockaddr_in addr = loopback(port);
    const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    ASSERT_TRUE(rc == 0 || errno == EINPROGRESS) << std::strerror(errno);
    fds.push_back(fd);
  }
  // A loopback handshake the kernel can queue completes at once; one it
  // cannot stays pending until the SYN's retransmission (a second later).
  int connected = 0;
  for (const int fd : fds) {
    pollfd p{fd, POLLOUT, 0};
    int err = -1;
    socklen_t len = sizeof err;
    if (::poll(&p, 1, 500) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
        err == 0)
      ++connected;
    ::close(fd);
  }
  EXPECT_EQ(connected, kClients);
  idle.http.stop();
}

// Everything the server sends on one connection until it closes it (a
// bound of 10 s: "<open>" is appended when it did not close). With
// `half_close` the client shuts its sending side down after `data`.
std::string until_closed(int port, const std::string& data, bool half_close = false) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  const sockaddr_in addr = loopback(port);
  const timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, data.data(), data.size(), MSG_NOSIGNAL) == ssize_t(data.size())) {
    if (half_close) ::shutdown(fd, SHUT_WR);
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, size_t(n));
    if (n < 0) out += "<open>";
  }
  ::close(fd);
  return out;
}

// Sends `parts` over a fresh connection to the server on `port` (stopping
// at the first that cannot be sent) and returns the server's first `count`
// responses, status line to the end of the body, back to back; less if the
// rest did not come within 10 seconds.
std::string raw_responses(int port, const std::vector<std::string>& parts, size_t count = 1) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  const sockaddr_in addr = loopback(port);
  const timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string out;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
    for (const std::string& part : parts)
      if (::send(fd, part.data(), part.size(), MSG_NOSIGNAL) != ssize_t(part.size())) break;
    size_t done = 0, end = 0;  // responses complete, and where the last ends
    char buf[4096];
    for (ssize_t n; done < count && (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) {
      out.append(buf, size_t(n));
      while (done < count) {
        const size_t head_end = out.find("\r\n\r\n", end);
        if (head_end == std::string::npos) break;
        const size_t at = out.find("Content-Length: ", end);
        if (at == std::string::npos || at > head_end) {
          done = count;  // no length to find its end by
          break;
        }
        const size_t next = head_end + 4 + std::stoul(out.substr(at + 16));
        if (out.size() < next) break;
        end = next;
        ++done;
      }
    }
    if (done == count) out.resize(std::min(out.size(), end == 0 ? out.size() : end));
  }
  ::close(fd);
  return out;
}

TEST_F(HttpServerTest, RoutesMethodsAndLimits) {
  LiveServer server(*model_);
  httplib::Client c = server.client();
  expect_error(c.Get("/v1/nope", auth()), 404);
  expect_error(c.Get("/", auth()), 404);
  // The message quotes the decoded path: a newline and a byte that is not
  // UTF-8 come back escaped, in one line of valid JSON.
  const auto odd = c.Get("/v1/a%0Ab%FF", auth());
  expect_error(odd, 404);
  const Json odd_body = Json::parse(odd->body, nullptr, false);
  if (odd_body.is_object()) {
    EXPECT_EQ(odd_body["error"]["message"], "Unknown request URL: GET /v1/a\\nb\\xff.");
  }
  auto wrong = c.Get("/v1/chat/completions", auth());
  expect_error(wrong, 405);
  EXPECT_EQ(wrong->get_header_value("Allow"), "POST");
  expect_error(c.Post("/v1/models", auth(), "{}", "application/json"), 405);
  expect_error(c.Delete("/health"), 405);
  // Over the 64 KiB body cap.
  expect_error(c.Post("/v1/completions", auth(), std::string(100 << 10, ' '), "application/json"),
               413);
  // A request line over httplib's limit.
  expect_error(c.Get(("/v1/" + std::string(10000, 'a')).c_str(), auth()), 414);
  // Headers over 64 KiB in all, each line well under httplib's 8 KiB: 431
  // (their number was not bounded: one request could fill the memory).
  std::string head = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 80; ++i)
    head += "X-Pad-" + std::to_string(i) + ": " + std::string(1000, 'a') + "\r\n";
  const std::string big = raw_responses(server.port(), {head + "\r\n"});
  EXPECT_EQ(big.rfind("HTTP/1.1 431 ", 0), 0u) << big;
  EXPECT_NE(big.find("64 KiB"), std::string::npos) << big;
  // One header line over 8 KiB: 431 too.
  const std::string long_line = raw_responses(
      server.port(),
      {"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(9000, 'b') + "\r\n\r\n"});
  EXPECT_EQ(long_line.rfind("HTTP/1.1 431 ", 0), 0u) << long_line;
  EXPECT_NE(long_line.find("8 KiB a line"), std::string::npos) << long_line;
  // A request line past the 64 KiB of the whole head: still a 414 with its
  // error object, and the connection closed.
  const std::string huge = until_closed(
      server.port(), "GET /" + std::string(100000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(huge.rfind("HTTP/1.1 414 ", 0), 0u) << huge.substr(0, 200);
  EXPECT_NE(huge.find("\"error\""), std::string::npos) << huge.substr(0, 200);
  EXPECT_EQ(huge.find("<open>"), std::string::npos);
}

TEST_F(HttpServerTest, BadBodiesAre400s) {
  LiveServer server(*model_);
  httplib::Client c = server.client();
  auto post = [&](const char* route, const std::string& body) {
    return c.Post(route, auth(), body, "application/json");
  };
  expect_error(post("/v1/chat/completions", "{\"messages\": ["), 400);
  expect_error(post("/v1/chat/completions", ""), 400);
  expect_error(post("/v1/chat/completions", "{\"messages\": 3}"), 400, "messages");
  expect_error(post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}],
                                               "tools": [{"type": "function"}]})"),
               400, "tools[0].function");
  expect_error(post("/v1/completions", R"({"prompt": "x", "n": 129})"), 400, "n");
  expect_error(post("/v1/completions", R"({"prompt": "x", "bogus": 1})"), 400, "bogus");
  // Token ids outside the vocabulary (512 tokens).
  expect_error(post("/v1/completions", R"({"prompt": [1, 512]})"), 400, "prompt");
  // Bytes that are not UTF-8, NULs, deep nesting: answered, never a crash.
  for (const std::string& junk :
       {std::string("{\"prompt\": \"\xff\xfe\"}"), std::string("\0\0\0", 3),
        std::string(2000, '[') + std::string(2000, ']'), std::string("{\"prompt\": 1e999}")}) {
    auto r = post("/v1/completions", junk);
    ASSERT_TRUE(r);
    EXPECT_NE(r->status, 500) << r->body;
  }
  // No token ids is a 400; an empty text is the start of a text (BOS).
  expect_error(post("/v1/completions", R"({"prompt": []})"), 400, "prompt");
  const auto empty_text = post("/v1/completions", R"({"prompt": "", "max_tokens": 2})");
  ASSERT_TRUE(empty_text);
  EXPECT_EQ(empty_text->status, 200) << empty_text->body;
  EXPECT_NE(empty_text->body.find("\"prompt_tokens\":1"), std::string::npos) << empty_text->body;
}

// However a body is framed or labelled, it is capped at --max-body and read
// as JSON: chunked bodies used to be read whole whatever their size, and a
// JSON body sent as form data (curl -d without a Content-Type) over 8 KiB
// was answered 413.
TEST_F(HttpServerTest, BodiesAreCappedAndReadAsJsonHoweverFramed) {
  LiveServer server(*model_);
  httplib::Client c = server.client();
  const std::string small = Json({{"prompt", "Once"}, {"max_tokens", 2}}).dump();
  // A 20 KiB JSON body labelled as form data is served.
  const std::string padded =
      Json({{"prompt", "Once"}, {"max_tokens", 2}, {"user", std::string(20 << 10, 'u')}}).dump();
  const auto form = c.Post("/v1/completions", auth(), padded, "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 200) << form->body;
  // A chunked body within the cap is served...
  const auto chunked = c.Post(
      "/v1/completions", auth(),
      [&](size_t, httplib::DataSink& sink) {
        sink.write(small.data(), small.size());
        sink.done();
        return true;
      },
      "application/json");
  ASSERT_TRUE(chunked);
  EXPECT_EQ(chunked->status, 200) << chunked->body;
  // ...and one over it refused once the cap is passed (the client may
  // still be sending).
  std::vector<std::string> parts = {
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + std::string(kKey) +
      "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"};
  const std::string piece = "1000\r\n" + std::string(4096, ' ') + "\r\n";
  for (int i = 0; i < 20; ++i) parts.push_back(piece);  // 80 KiB, over the 64 KiB cap
  const std::string over = raw_responses(server.port(), parts);
  EXPECT_EQ(over.rfind("HTTP/1.1 413 ", 0), 0u) << over;
  EXPECT_NE(over.find("\"error\""), std::string::npos) << over;
  // A transfer coding other than chunked: 501, naming it.
  const std::string gzip = raw_responses(
      server.port(),
      {"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + std::string(kKey) +
       "\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n"});
  EXPECT_EQ(gzip.rfind("HTTP/1.1 501 ", 0), 0u) << gzip;
  EXPECT_NE(gzip.find("gzip, chunked"), std::string::npos) << gzip;
  // A multipart upload: 415, naming the type to send.
  const auto multipart = c.Post("/v1/completions", auth(),
                                httplib::MultipartFormDataItems{{"prompt", "Once", "", ""}});
  expect_error(multipart, 415);
  if (multipart) {
    EXPECT_NE(multipart->body.find("application/json"), std::string::npos) << multipart->body;
  }
  // A POST without a body (no Content-Length, not chunked) is told so at
  // once, instead of a read until the connection closes.
  const std::string bare = raw_responses(
      server.port(), {"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                      std::string(kKey) + "\r\n\r\n"});
  EXPECT_EQ(bare.rfind("HTTP/1.1 400 ", 0), 0u) << bare;
  EXPECT_NE(bare.find("The request body is empty"), std::string::npos) << bare;
  // Answered before its body is read (no key here), a request's connection
  // closes after the answer, so that the body is not taken for the next
  // request; a body read whole keeps it open.
  const std::string unread =
      raw_responses(server.port(), {"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                    std::to_string(small.size()) + "\r\n\r\n" + small});
  EXPECT_EQ(unread.rfind("HTTP/1.1 401 ", 0), 0u) << unread;
  EXPECT_NE(unread.find("Connection: close\r\n"), std::string::npos) << unread;
  const std::string read = raw_responses(
      server.port(),
      {"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + std::string(kKey) +
       "\r\nContent-Length: " + std::to_string(small.size()) + "\r\n\r\n" + small});
  EXPECT_EQ(read.rfind("HTTP/1.1 200 ", 0), 0u) << read;
  EXPECT_EQ(read.find("Connection: close"), std::string::npos) << read;
  // The server still serves.
  const auto after = c.Post("/v1/completions", auth(), small, "application/json");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200) << after->body;
}

// Sends `head` and then `trickle` a byte every 50 ms, watching for the
// server's answer; returns what the server sent (empty if nothing) and
// whether it closed the connection or answered before the trickle ended.
struct Trickled {
  std::string response;
  bool cut_short = false;
};
Trickled trickle(int port, const std::string& head, const std::string& trickle) {
  Trickled out;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return out;
  const sockaddr_in addr = loopback(port);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == ssize_t(head.size())) {
    for (const char c : trickle) {
      if (::send(fd, &c, 1, MSG_NOSIGNAL) != 1) {
        out.cut_short = true;
        break;
      }
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) == 1) {
        out.cut_short = true;
        break;
      }
    }
    if (out.cut_short) {
      // To the end of the answer: the server closes its side after it.
      const timeval tv{10, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char buf[4096];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
        out.response.append(buf, size_t(n));
    }
  }
  ::close(fd);
  return out;
}

// A client that trickles its request, each byte well within the read
// timeout, is cut off once the request is late as a whole: its headers
// within the timeout of their first byte, its body within the timeout of
// them plus a second per 64 KiB, else 408. (Timed per socket operation
// only, a trickle held a worker thread for as long as it went on.)
size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// RFC 9112 at the socket: HTTP/1.0 gets a plain (or close-delimited)
// body and the connection closes; ambiguous framing (two Content-Lengths
// that differ, a Content-Length beside a Transfer-Encoding) is a 400 and
// nothing after it is read; after an unparseable request line nothing more
// is read either; chunk extensions are legal.
TEST_F(HttpServerTest, FramingAndVersionAsRfc9112) {
  LiveServer server(*model_);
  const std::string key = "Authorization: Bearer " + std::string(kKey) + "\r\n";
  const std::string body = Json({{"prompt", "Once"}, {"max_tokens", 2}}).dump();
  const std::string stream_body =
      Json({{"prompt", "Once"}, {"max_tokens", 2}, {"stream", true}}).dump();
  const auto post = [&](const std::string& version, const std::string& b,
                        const std::string& headers) {
    return "POST /v1/completions " + version + "\r\nHost: x\r\n" + key + headers + "\r\n" + b;
  };
  const std::string cl = "Content-Length: " + std::to_string(body.size()) + "\r\n";
  for (const std::string& b : {body, stream_body}) {
    const std::string old = until_closed(
        server.port(), post("HTTP/1.0", b, "Content-Length: " + std::to_string(b.size()) + "\r\n") +
                           "GET /health HTTP/1.0\r\n\r\n");
    EXPECT_EQ(old.rfind("HTTP/1.1 200 ", 0), 0u) << old;
    EXPECT_EQ(old.find("Transfer-Encoding"), std::string::npos) << old;
    EXPECT_EQ(old.find("Keep-Alive"), std::string::npos) << old;
    EXPECT_EQ(count_of(old, "HTTP/1.1 "), 1u) << old;  // closed after the first answer
    EXPECT_EQ(old.find("<open>"), std::string::npos);
  }
  const std::string two_lengths =
      until_closed(server.port(), post("HTTP/1.1", body, cl + "Content-Length: 5\r\n") +
                                      "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(two_lengths.rfind("HTTP/1.1 400 ", 0), 0u) << two_lengths;
  EXPECT_NE(two_lengths.find("Content-Length headers that differ"), std::string::npos);
  EXPECT_EQ(count_of(two_lengths, "HTTP/1.1 "), 1u) << two_lengths;
  const std::string same_lengths =
      until_closed(server.port(), post("HTTP/1.1", body, cl + cl + "Connection: close\r\n"));
  EXPECT_EQ(same_lengths.rfind("HTTP/1.1 200 ", 0), 0u) << same_lengths;
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  const std::string chunks = std::string(size) + ";name=value\r\n" + body + "\r\n0\r\n\r\n";
  const std::string both =
      until_closed(server.port(), post("HTTP/1.1", chunks, cl + "Transfer-Encoding: chunked\r\n") +
                                      "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(both.rfind("HTTP/1.1 400 ", 0), 0u) << both;
  EXPECT_EQ(count_of(both, "HTTP/1.1 "), 1u) << both;
  const std::string extension =
      until_closed(server.port(),
                   post("HTTP/1.1", chunks, "Transfer-Encoding: chunked\r\nConnection: close\r\n"));
  EXPECT_EQ(extension.rfind("HTTP/1.1 200 ", 0), 0u) << extension;
  const std::string garbage =
      until_closed(server.port(), "GARBAGE\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(garbage.rfind("HTTP/1.1 400 ", 0), 0u) << garbage;
  EXPECT_EQ(count_of(garbage, "HTTP/1.1 "), 1u) << garbage;
}

// Connections that send nothing hold no worker: with four times as many
// of them open as there are HTTP threads (and a keep-alive timeout far
// longer than the client waits), a new request is answered, and so is a
// request on one of the idle connections.
// A client that half-closes after its request (shutdown(SHUT_WR), `nc -N`)
// still reads the answer: a short one, a whole body that waited for its
// job, a stream.
TEST_F(HttpServerTest, AHalfClosedClientGetsItsAnswer) {
  LiveServer server(*model_);
  const std::string health =
      until_closed(server.port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", true);
  EXPECT_EQ(health.rfind("HTTP/1.1 200 ", 0), 0u) << health;
  for (const bool stream : {false, true}) {
    const std::string body =
        Json({{"prompt", "Once"}, {"max_tokens", 40}, {"stream", stream}}).dump();
    const std::string out = until_closed(
        server.port(),
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + std::string(kKey) +
            "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body,
        true);
    EXPECT_EQ(out.rfind("HTTP/1.1 200 ", 0), 0u) << out;
    EXPECT_NE(out.find(stream ? "data: [DONE]" : "\"completion_tokens\":"), std::string::npos)
        << out;
  }
}

TEST_F(HttpServerTest, IdleConnectionsHoldNoWorker) {
  LiveServer server(*model_, {.keep_alive_seconds = 60, .http_threads = 2});
  std::vector<int> idle;
  for (int i = 0; i < 8; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const sockaddr_in addr = loopback(server.port());
    ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
    idle.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // all accepted
  httplib::Client c = server.client();
  c.set_read_timeout(10, 0);
  for (int i = 0; i < 3; ++i) {
    const auto health = c.Get("/health");
    ASSERT_TRUE(health) << "no answer with idle connections open: " << int(health.error());
    EXPECT_EQ(health->status, 200);
  }
  // A parked connection is served when its request comes.
  const std::string request = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(::send(idle[3], request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
  const timeval tv{10, 0};
  ::setsockopt(idle[3], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[256] = {};
  ASSERT_GT(::recv(idle[3], buf, sizeof buf - 1, 0), 0);
  EXPECT_EQ(std::string(buf).rfind("HTTP/1.1 200 ", 0), 0u) << buf;
  for (int fd : idle) ::close(fd);
}

TEST_F(HttpServerTest, ATrickledRequestIsCutOffAt408) {
  Options o;
  o.read_timeout_seconds = 1;
  LiveServer server(*model_, o);
  // 80 bytes, 50 ms apart: 4 s or more, where the headers are due in 1 s.
  const Trickled headers = trickle(server.port(), "GET /health HTTP/1.1\r\nHost: x\r\n",
                                   "X-Slow: " + std::string(70, 'a') + "\r\n\r\n");
  EXPECT_TRUE(headers.cut_short) << "the whole trickle was read";
  EXPECT_EQ(headers.response.rfind("HTTP/1.1 408 ", 0), 0u) << headers.response;
  const std::string body =
      Json({{"prompt", "Once"}, {"max_tokens", 2}}).dump() + std::string(60, ' ');
  const Trickled slow_body = trickle(
      server.port(),
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + std::string(kKey) +
          "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\n\r\n",
      body);
  EXPECT_TRUE(slow_body.cut_short) << "the whole trickle was read";
  EXPECT_EQ(slow_body.response.rfind("HTTP/1.1 408 ", 0), 0u) << slow_body.response;
  EXPECT_NE(slow_body.response.find("\"error\""), std::string::npos) << slow_body.response;
  // Requests sent together on one connection are all answered, and the
  // server goes on serving.
  const std::string health = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string both = raw_responses(server.port(), {health + health}, 2);
  EXPECT_EQ(both.rfind("HTTP/1.1 200 ", 0), 0u) << both;
  EXPECT_NE(both.find("HTTP/1.1 200 ", 1), std::string::npos) << both;
  httplib::Client c = server.client();
  const auto after = c.Get("/health");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
}

TEST_F(HttpServerTest, PromptOverTheContextNamesBothNumbers) {
  LiveServer server(*model_);
  httplib::Client c = server.client();
  Json ids = Json::array();
  for (int i = 0; i < 300; ++i) ids.push_back(100);
  auto r = c.Post("/v1/completions", auth(), Json({{"prompt", ids}}).dump(), "application/json");
  expect_error(r, 400, "prompt");
  const Json e = Json::parse(r->body)["error"];
  EXPECT_EQ(e["code"], "context_length_exceeded");
  const std::string message = e["message"];
  EXPECT_NE(message.find("256 tokens"), std::string::npos) << message;
  EXPECT_NE(message.find("300 tokens"), std::string::npos) << message;

  // max_tokens beyond the room is capped: 250 prompt ids leave 6.
  ids.erase(ids.begin(), ids.begin() + 50);
  auto capped = c.Post("/v1/completions", auth(),
                       Json({{"prompt", ids}, {"max_tokens", 1000}, {"temperature", 0}}).dump(),
                       "application/json");
  ASSERT_TRUE(capped);
  ASSERT_EQ(capped->status, 200) << capped->body;
  const Json usage = Json::parse(capped->body)["usage"];
  EXPECT_EQ(usage["prompt_tokens"], 250);
  EXPECT_LE(usage["completion_tokens"].get<int>(), 6);
}

TEST_F(HttpServerTest, WholeAndStreamedCompletionsAgree) {
  LiveServer server(*model_);
  httplib::Client c = server.client();
  const Json request = {{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}};
  auto whole = c.Post("/v1/completions", auth(), request.dump(), "application/json");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  const Json body = Json::parse(whole->body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 16);

  Json streamed_request = request;
  streamed_request["stream"] = true;
  streamed_request["stream_options"] = {{"include_usage", true}};
  auto stream = c.Post("/v1/completions", auth(), streamed_request.dump(), "application/json");
  ASSERT_TRUE(stream);
  ASSERT_EQ(stream->status, 200) << stream->body;
  EXPECT_EQ(stream->get_header_value("Content-Type"), "text/event-stream");
  std::string text, finish;
  Json usage;
  bool done = false;
  size_t at = 0;
  while ((at = stream->body.find("data: ", at)) != std::string::npos) {
    const size_t end = stream->body.find("\n\n", at);
    ASSERT_NE(end, std::string::npos);
    const std::string data = stream->body.substr(at + 6, end - at - 6);
    at = end;
    ASSERT_FALSE(done) << "an event after [DONE]";
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    const Json chunk = Json::parse(data);
    if (!chunk["usage"].is_null()) usage = chunk["usage"];
    for (const Json& choice : chunk["choices"]) {
      text += choice["text"].get<std::string>();
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(text, body["choices"][0]["text"]);
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(usage["completion_tokens"], 16);
}

TEST_F(HttpServerTest, ChatUsesTheTemplate) {
  LiveServer server(*model_);
  httplib::Client c = server.client();
  const Json request = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 4}};
  auto r = c.Post("/v1/chat/completions", auth(), request.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json body = Json::parse(r->body);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  const tok::Tokenizer& t = *model_->tokenizer;
  const std::string rendered =
      tok::ChatTemplate::by_name("chatml").apply({{"user", "Hi"}}, /*add_generation_prompt=*/true);
  EXPECT_EQ(body["usage"]["prompt_tokens"], 1 + t.encode(rendered, false, true).size());
}

// chatml, but a conversation without a user turn is an error (as Qwen's
// templates raise "No user query found in messages").
constexpr char kNeedsAUserTurn[] =
    "{% if not (messages | selectattr('role', 'equalto', 'user') | list) %}"
    "{{ raise_exception('No user query found in messages.') }}{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

void chats_sharing_a_system_prompt(const test::LoadedModel& model, const char* template_source) {
  Options o;
  o.context = 1024;
  o.whole_prompt_tokens = 0;
  o.kv = "k4v2";
  o.template_source = template_source;
  LiveServer server(model, o);
  httplib::Client c = server.client();
  std::string system = "You tell short stories.";
  for (int i = 0; i < 40; ++i) system += " Lily had a red ball and a big dog.";
  int64_t cached[2] = {-1, -1};
  int64_t prompt_tokens = 0;
  for (int i = 0; i < 2; ++i) {
    const Json request = {
        {"messages",
         {{{"role", "system"}, {"content", system}},
          {{"role", "user"},
           {"content", i == 0 ? "Tell me one." : "Another, please, about a cat."}}}},
        {"max_tokens", 2}};
    auto r = c.Post("/v1/chat/completions", auth(), request.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const Json usage = Json::parse(r->body)["usage"];
    cached[i] = usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
    if (i == 0) prompt_tokens = usage["prompt_tokens"].get<int64_t>();
  }
  const tok::Tokenizer& t = *model.tokenizer;
  const int64_t system_tokens =
      1 + int64_t(t.encode(tok::ChatTemplate::by_name("chatml").apply({{"system", system}}, false),
                           false, true)
                      .size());
  EXPECT_EQ(cached[0], 0);
  EXPECT_GT(prompt_tokens, system_tokens);
  EXPECT_GE(cached[1], system_tokens - 15);  // the grid boundary (16) at or before its end
  // The user turn's header ("<|im_start|>user\n") is shared too where the
  // start is found by parting.
  EXPECT_LE(cached[1], system_tokens + (template_source ? 16 : 0));
}

// Two chats with one system prompt: the first leaves a checkpoint where its
// last message starts, so the second reuses the system prompt on its first
// visit, also with a residual ring (k4v2: a checkpoint is never cut shorter),
// and with a template that refuses to render the system prompt alone (the
// start is then where the prompt parts from one with another last message).
TEST_F(HttpServerTest, ChatsSharingASystemPromptReuseIt) {
  for (const char* source : {static_cast<const char*>(nullptr), kNeedsAUserTurn}) {
    SCOPED_TRACE(source ? "template refusing a system prompt alone" : "chatml");
    chats_sharing_a_system_prompt(*model_, source);
  }
}

TEST_F(HttpServerSlowTest, ClientThatLeavesCancelsItsJob) {
  LiveServer server(*model_);
  httplib::Client c = server.client();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = auth();
  req.headers.emplace("Content-Type", "application/json");
  // The receiver hangs up after its second chunk: the job stops a few
  // tokens later (each token is a write, and the second write after the
  // peer closed fails), far from its 240 (over a second of decoding).
  req.body = Json({{"prompt", "Once"}, {"max_tokens", 240}, {"stream", true}}).dump();
  int chunks = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 2; };
  c.send(req);
  EXPECT_EQ(chunks, 2);
  const auto start = std::chrono::steady_clock::now();
  while (server.scheduler().stats().active > 0) {
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5))
        << "the job is still running";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(server.http().wait_idle(std::chrono::seconds(5)));
  // The job ended cancelled, not at its 240 tokens.
  EXPECT_LT(server.scheduler().stats().completion_tokens, 200u);
}

TEST_F(HttpServerSlowTest, FullQueueAndDrainAre503WithRetryAfter) {
  LiveServer server(*model_, {.parallel = 1, .queue = 1});
  // One long stream holds the one slot, a second waits in the one queue place.
  auto long_stream = [&] {
    httplib::Client c = server.client();
    c.Post("/v1/completions", auth(),
           Json({{"prompt", "Once"}, {"max_tokens", 200}, {"stream", true}}).dump(),
           "application/json");
  };
  auto wait_for = [&](auto done) {
    const auto start = std::chrono::steady_clock::now();
    while (!done() && std::chrono::steady_clock::now() - start < std::chrono::seconds(10))
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  std::thread holder(long_stream);
  wait_for([&] { return server.scheduler().stats().active == 1; });
  std::thread waiter(long_stream);
  wait_for([&] { return server.scheduler().stats().queued == 1; });
  EXPECT_EQ(server.scheduler().stats().active, 1);
  EXPECT_EQ(server.scheduler().stats().queued, 1);
  httplib::Client c = server.client();
  auto busy =
      c.Post("/v1/completions", auth(), R"({"prompt": "x", "max_tokens": 2})", "application/json");
  expect_error(busy, 503);
  EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
  server.http().stop_admitting();
  auto draining = c.Post("/v1/completions", auth(), R"({"prompt": "x"})", "application/json");
  expect_error(draining, 503);
  EXPECT_EQ(draining->get_header_value("Retry-After"), "1");
  // Every route but /metrics says so while draining; /health too, so that
  // a load balancer takes the server out.
  expect_error(c.Get("/v1/models", auth()), 503);
  const auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(health->body, R"({"status":"draining"})");
  EXPECT_EQ(health->get_header_value("Retry-After"), "1");
  const auto metrics = c.Get("/metrics", auth());
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  server.scheduler().drain(std::chrono::milliseconds(0));
  holder.join();
  waiter.join();
}

}  // namespace
}  // namespace tkv::server
