#include "server/http_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "common/error.h"
#include "server/idle_connections.h"

namespace tkv::server {
namespace {

using Clock = std::chrono::steady_clock;

// poll() for `events` on `sock` for at most `ms` (>= 0) milliseconds,
// polling again after EINTR: > 0 ready (the events that were, in `revents` when
// given), 0 timed out, < 0 error.
int wait_for(int sock, short events, int64_t ms, short* revents = nullptr) {
  const Clock::time_point end = Clock::now() + std::chrono::milliseconds(ms);
  while (true) {
    pollfd p{sock, events, 0};
    const int64_t left = std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
    const int rc = ::poll(&p, 1, int(std::min<int64_t>(left, 1 << 30)));
    if (revents) *revents = p.revents;
    if (rc >= 0 || errno != EINTR) return rc;
  }
}

// What reading `sock` would find now, without taking it.
enum class PeerInput { kOpen, kEnded, kGone };
PeerInput peer_input(int sock) {
  short revents = 0;
  const int ready = wait_for(sock, POLLIN, 0, &revents);
  if (ready == 0) return PeerInput::kOpen;
  // A reset (or both directions shut) shows here; recv() would still say
  // end of input when the peer's FIN came before its reset.
  if (ready < 0 || (revents & (POLLERR | POLLHUP))) return PeerInput::kGone;
  char byte;
  ssize_t n;
  do {
    n = ::recv(sock, &byte, 1, MSG_PEEK);
  } while (n < 0 && errno == EINTR);
  if (n > 0) return PeerInput::kOpen;
  return n == 0 ? PeerInput::kEnded : PeerInput::kGone;
}

void address_of(int sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  const int rc = peer ? ::getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len)
                      : ::getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    port = ntohs(a->sin6_port);
  }
  ip = text;
}

// A connection's reads and writes, with the deadlines of its current
// request. Reads are buffered (httplib reads the request line and headers a
// byte at a time), one buffer for the connection's life, so that the start
// of a pipelined request is not lost with the one before it.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int sock, int64_t read_timeout_ms, int64_t write_timeout_ms)
      : sock_(sock), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms) {}

  // A request starts: its line and headers are due within the read timeout.
  void begin_request() {
    deadline_ = Clock::now() + std::chrono::milliseconds(read_timeout_ms_);
    in_body_ = timed_out_ = close_after_ = close_always_ = head_too_large_ = false;
    long_header_line_ = false;
    head_bytes_ = head_lines_ = line_bytes_ = written_ = 0;
  }
  void start_body() {
    in_body_ = true;
    deadline_ = Clock::now() + std::chrono::milliseconds(read_timeout_ms_);
  }
  bool timed_out() const { return timed_out_; }
  // Over kMaxHeadBytes in all, or a header line over kMaxLineBytes (which
  // httplib refuses as unparseable).
  bool head_too_large() const { return head_too_large_ || long_header_line_; }
  // Whether the request line has not ended yet.
  bool in_request_line() const { return head_lines_ == 0; }
  // Bytes of a response written for the current request.
  size_t written() const { return written_; }
  void close_after_response(bool close) { close_after_ = close; }
  void close_always() { close_always_ = true; }
  bool close_after() const {
    return close_after_ || close_always_ || timed_out_ || head_too_large_;
  }
  bool has_buffered() const { return buf_at_ < buf_len_; }

  bool is_readable() const override { return wait_for(sock_, POLLIN, read_wait_ms()) > 0; }
  // A peer whose input has ended may only have half-closed (shutdown
  // SHUT_WR, `nc -N`, some proxies) and still read the answer: the end of
  // its input does not stop a write. One that has left resets the
  // connection once something is written to it, and that stops the next.
  bool is_writable() const override {
    if (wait_for(sock_, POLLOUT, write_timeout_ms_) <= 0) return false;
    const PeerInput input = peer_input(sock_);
    input_ended_ = input_ended_ || input == PeerInput::kEnded;
    return input != PeerInput::kGone;
  }
  bool input_ended() const { return input_ended_; }

  ssize_t read(char* ptr, size_t size) override {
    if (head_too_large_) return -1;
    if (has_buffered()) return take_buffered(ptr, size);
    const int64_t wait_ms = read_wait_ms();
    const int ready = wait_ms > 0 ? wait_for(sock_, POLLIN, wait_ms) : 0;
    if (ready <= 0) {
      timed_out_ = timed_out_ || ready == 0;
      return -1;
    }
    ssize_t n;
    do {
      n = ::recv(sock_, buf_.data(), buf_.size(), 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return n;
    buf_at_ = 0;
    buf_len_ = size_t(n);
    // A body's allowance grows with what has arrived of it.
    if (in_body_)
      deadline_ += std::chrono::microseconds(int64_t(n) * 1000000 /
                                             int64_t(DeadlineServer::kMinBodyBytesPerSecond));
    return take_buffered(ptr, size);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n > 0) written_ += size_t(n);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address_of(sock_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address_of(sock_, false, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  // How long the next read may wait: the read timeout, or less where the
  // request's deadline comes first.
  int64_t read_wait_ms() const {
    const int64_t left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    return std::min(read_timeout_ms_, left);
  }
  ssize_t take_buffered(char* ptr, size_t size) {
    size_t n = std::min(size, buf_len_ - buf_at_);
    if (!in_body_) {
      if (head_bytes_ + n > DeadlineServer::kMaxHeadBytes) {
        head_too_large_ = true;
        return -1;
      }
      head_bytes_ += n;
      for (size_t i = 0; i < n; ++i) {
        if (buf_[buf_at_ + i] == '\n') {
          ++head_lines_;
          line_bytes_ = 0;
        } else if (++line_bytes_ > DeadlineServer::kMaxLineBytes && head_lines_ > 0) {
          long_header_line_ = true;
        }
      }
    }
    std::memcpy(ptr, buf_.data() + buf_at_, n);
    buf_at_ += n;
    return ssize_t(n);
  }

  int sock_;
  int64_t read_timeout_ms_, write_timeout_ms_;
  Clock::time_point deadline_ = Clock::now();
  bool in_body_ = false, timed_out_ = false, close_after_ = false, close_always_ = false,
       head_too_large_ = false;
  size_t head_bytes_ = 0;                   // of the request line and headers read so far
  size_t head_lines_ = 0, line_bytes_ = 0;  // of them: line ends, and bytes since the last
  bool long_header_line_ = false;
  size_t written_ = 0;
  mutable bool input_ended_ = false;  // the peer sent FIN (is_writable saw it)
  std::array<char, 4096> buf_{};
  size_t buf_at_ = 0, buf_len_ = 0;
};

// The connection the calling thread is serving a request of (set around
// process_request).
thread_local ConnectionStream* t_request = nullptr;

// Closes a connection. One answered with the client perhaps still sending
// (a body refused unread, a request out of time) is closed lingering: at
// once, the rest of its body would reset the connection, and the client
// lose the answer before reading it. So the answer's end is marked (FIN)
// and what the client still sends is read and dropped until it closes too,
// falls silent for a second, or `linger_ms` has passed.
void close_connection(int sock, bool linger, int64_t linger_ms) {
  if (linger) {
    ::shutdown(sock, SHUT_WR);
    const Clock::time_point end = Clock::now() + std::chrono::milliseconds(linger_ms);
    std::array<char, 16384> sink;
    for (Clock::time_point now = Clock::now(); now < end; now = Clock::now()) {
      const int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(end - now).count();
      if (wait_for(sock, POLLIN, std::min<int64_t>(1000, left)) <= 0) break;
      if (::recv(sock, sink.data(), sink.size(), 0) <= 0) break;
    }
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
}

// Parked connections at most: half the descriptors the process may open,
// after raising its soft limit to the hard one (bounded), so that a client
// holding idle connections cannot stop the server from accepting.
size_t idle_capacity() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 512;
  const rlim_t want = std::min<rlim_t>(limit.rlim_max, 65536);
  if (limit.rlim_cur < want) {
    limit.rlim_cur = want;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  return std::max<size_t>(64, size_t(limit.rlim_cur) / 2);
}

}  // namespace

// The worker threads, and the poller holding the connections that wait for
// a request: a connection that becomes readable goes back to the workers.
class DeadlineServer::Workers final : public httplib::ThreadPool {
 public:
  Workers(DeadlineServer& server, size_t threads)
      : httplib::ThreadPool(threads),
        idle(idle_capacity(),
             [this, &server](int sock, size_t left) {
               enqueue([&server, sock, left] { server.serve(sock, left); });
             }),
        server_(server) {}
  // The parked connections close before the workers stop (none is handed
  // to them afterwards); then the server no longer names these workers
  // (httplib destroys them when its listen loop ends).
  void shutdown() override {
    idle.stop();
    httplib::ThreadPool::shutdown();
    server_.workers_ = nullptr;
  }
  IdleConnections idle;

 private:
  DeadlineServer& server_;
};

bool DeadlineServer::refuse(httplib::Stream& stream, int status, const char* reason) const {
  const std::string body = refusal_body_ ? refusal_body_(status) : std::string();
  const std::string head = str("HTTP/1.1 ", status, " ", reason,
                               "\r\nConnection: close\r\nContent-Type: application/json"
                               "\r\nContent-Length: ",
                               body.size(), "\r\n\r\n");
  return stream.write(head.data(), head.size()) == ssize_t(head.size()) &&
         stream.write(body.data(), body.size()) == ssize_t(body.size());
}

void DeadlineServer::set_worker_threads(size_t threads) {
  new_task_queue = [this, threads] {
    auto* workers = new Workers(*this, threads);
    workers_ = workers;
    return workers;
  };
}

void DeadlineServer::headers_read() {
  if (t_request) t_request->start_body();
}

bool DeadlineServer::timed_out() {
  return t_request && t_request->timed_out();
}

void DeadlineServer::close_after_response(bool close) {
  if (t_request) t_request->close_after_response(close);
}

void DeadlineServer::close_after_response_always() {
  if (t_request) t_request->close_always();
}

bool DeadlineServer::peer_input_ended() {
  return t_request && t_request->input_ended();
}

bool DeadlineServer::head_too_large() {
  return t_request && t_request->head_too_large();
}

bool DeadlineServer::closes_after_response() {
  return t_request && t_request->close_after();
}

bool DeadlineServer::process_and_close_socket(socket_t sock) {
  serve(sock, keep_alive_max_count_);
  return true;
}

void DeadlineServer::serve(socket_t sock, size_t left) {
  const int64_t read_ms = int64_t(read_timeout_sec_) * 1000 + int64_t(read_timeout_usec_) / 1000;
  const int64_t write_ms = int64_t(write_timeout_sec_) * 1000 + int64_t(write_timeout_usec_) / 1000;
  ConnectionStream stream(sock, read_ms, write_ms);
  bool ok = false;
  for (; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    if (!stream.has_buffered()) {
      const int ready = wait_for(sock, POLLIN, 0);
      if (ready < 0) break;
      Workers* workers = workers_;
      if (ready == 0 && workers) {  // nothing to read yet: wait without a thread
        workers->idle.park(sock, left,
                           Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_));
        return;
      }
      // (Without the poller, the request's own deadline bounds the wait.)
    }
    stream.begin_request();
    bool closed_by_client = false;
    struct Serving {  // t_request for the request's life, however it ends
      explicit Serving(ConnectionStream* s) { t_request = s; }
      ~Serving() { t_request = nullptr; }
    } serving(&stream);
    ok = process_request(stream, /*close_connection=*/left == 1, closed_by_client, nullptr);
    // A request line past kMaxHeadBytes ends httplib's parse before it can
    // answer (a shorter one over its own limit gets its 414).
    if (!ok && stream.head_too_large() && stream.in_request_line() && stream.written() == 0)
      ok = refuse(stream, 414, "URI Too Long");
    if (!ok || closed_by_client || stream.close_after()) break;
  }
  close_connection(sock, ok && stream.close_after(), read_ms);
}

}  // namespace tkv::server
