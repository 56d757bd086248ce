// Connections waiting for their next request, held by one epoll thread
// instead of an HTTP worker thread each. A worker serves a connection while
// it has bytes to read; when it has none (a new connection whose client has
// not sent yet, a keep-alive connection between requests) the worker parks
// it here and goes back to the pool. When a parked connection becomes
// readable (a request, or the peer closing) it is handed back to the
// workers (`resume`); when it stays silent past its deadline (the
// keep-alive timeout) it is closed. So idle connections, however many,
// never keep another client's request from a worker.
//
// At most `capacity` connections are parked: past it the one parked longest
// is closed (a client that opens connections and sends nothing cannot use
// up the process's file descriptors).
//
// Thread-safe: park() from any worker; stop() once, before the workers'
// queue shuts down (it closes everything still parked; a later park()
// closes its socket at once).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace tkv::server {

class IdleConnections {
 public:
  using Clock = std::chrono::steady_clock;
  // Called on the epoll thread with a parked socket that became readable
  // and the `state` it was parked with; it now belongs to the callee.
  using Resume = std::function<void(int sock, size_t state)>;

  IdleConnections(size_t capacity, Resume resume);
  ~IdleConnections();  // stop()
  IdleConnections(const IdleConnections&) = delete;
  IdleConnections& operator=(const IdleConnections&) = delete;

  // Takes `sock`: resumed when readable, closed at `deadline` or when it is
  // the oldest one parked and the capacity is reached.
  void park(int sock, size_t state, Clock::time_point deadline);
  void stop();
  size_t size() const;

 private:
  struct Parked {
    size_t state;
    Clock::time_point deadline;
    uint64_t order;  // smaller: parked earlier
  };
  void loop();
  void drop_locked(int sock);  // forgets and closes it (mu_ held)
  int next_wait_ms_locked() const;

  const size_t capacity_;
  const Resume resume_;
  int epoll_ = -1;
  int wake_ = -1;  // an eventfd: stop() and an earlier deadline wake the loop
  mutable std::mutex mu_;
  std::map<int, Parked> parked_;
  uint64_t next_order_ = 0;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace tkv::server
