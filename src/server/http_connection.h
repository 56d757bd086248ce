// The connection loop of the HTTP front end: an httplib::Server whose
// per-connection loop and socket stream are this project's, for what
// cpp-httplib 0.11 (Debian 12's) does not bound. Its own stream times each
// socket operation out but nothing more, so a client that trickles its
// headers one byte at a time (a "slowloris") held a worker thread for as
// long as it kept going, and enough of them held every thread, /health's
// too; and it bounds the size of each header line but not their number, so
// one request's headers could fill the server's memory. Here, per request:
//  - the request line and headers must arrive whole within the read
//    timeout of their first byte, in at most kMaxHeadBytes (else 431);
//  - a body within the read timeout of the end of the headers, plus one
//    second for every kMinBodyBytesPerSecond of it that arrives (a slow
//    link gets through, a trickle does not);
//  - every socket operation still times out after the read (write)
//    timeout, as in httplib.
// A request that runs out of time is answered 408 (the handlers ask
// timed_out()), one whose headers are too large 431, and the connection is
// closed. Between requests -- before the first one too -- a connection with
// nothing to read holds no worker thread: it is parked (idle_connections.h)
// until a byte arrives, and closed when the keep-alive timeout passes
// first, so idle connections, however many, never keep another client's
// request waiting for a worker. At most keep_alive_max_count requests a
// connection, as in httplib.
//
// The guards of a request are reached from its handlers through the thread
// serving it: one worker serves a request from its first byte to its
// response.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>

namespace tkv::server {

class DeadlineServer final : public httplib::Server {
 public:
  static constexpr size_t kMinBodyBytesPerSecond = size_t(64) << 10;
  // The request line and headers together (each line is also held to 8 KiB
  // by httplib).
  static constexpr size_t kMaxHeadBytes = size_t(64) << 10;
  // One header line (httplib refuses longer ones; here they are a 431).
  static constexpr size_t kMaxLineBytes = size_t(8) << 10;

  // Called by the pre-routing handler: the calling thread's request has its
  // line and headers in; its body's deadline starts now.
  static void headers_read();
  // Whether the calling thread's request ran out of time.
  static bool timed_out();
  // Whether its line and headers passed kMaxHeadBytes, or a header line
  // kMaxLineBytes.
  static bool head_too_large();
  // Whether the calling thread's connection is closed after this response
  // (a body left unread on it, which the next request could not be told
  // from). A timed-out request's always is.
  static void close_after_response(bool close);
  // Whether it will be (set so, or timed out).
  static bool closes_after_response();
  // Whether the peer has closed its sending side (half-closed, or gone:
  // only a write tells which; Stream::is_writable is false once a write
  // made a departed peer reset the connection).
  static bool peer_input_ended();
  // The calling thread's connection closes after this response whatever
  // else is decided (an HTTP/1.0 request, ambiguous framing, a request that
  // could not be parsed).
  static void close_after_response_always();

  // `threads` workers serve the requests (set before listening).
  void set_worker_threads(size_t threads);
  // The JSON body of a refusal the connection loop sends itself (a request
  // line too long for httplib to reach its own 414).
  void set_refusal_body(std::function<std::string(int status)> body) {
    refusal_body_ = std::move(body);
  }

 private:
  class Workers;
  bool process_and_close_socket(socket_t sock) override;
  // Serves `sock` while it has requests to read, `left` more at most; parks
  // it when it has none yet.
  void serve(socket_t sock, size_t left);
  bool refuse(httplib::Stream& stream, int status, const char* reason) const;

  std::function<std::string(int status)> refusal_body_;
  std::atomic<Workers*> workers_{nullptr};  // while listening
};

}  // namespace tkv::server
