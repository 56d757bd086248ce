#include "server/idle_connections.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <utility>
#include <vector>

#include "common/error.h"

namespace tkv::server {

namespace {

void close_socket(int sock) {
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
}

void wake(int fd) {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(fd, &one, sizeof one);
}

}  // namespace

IdleConnections::IdleConnections(size_t capacity, Resume resume)
    : capacity_(std::max<size_t>(capacity, 1)), resume_(std::move(resume)) {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_ < 0 || wake_ < 0) fail("serve: cannot create the idle connections' poller");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_;
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
  thread_ = std::thread([this] { loop(); });
}

IdleConnections::~IdleConnections() {
  stop();
  ::close(epoll_);
  ::close(wake_);
}

void IdleConnections::park(int sock, size_t state, Clock::time_point deadline) {
  const std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) {
    close_socket(sock);
    return;
  }
  if (parked_.size() >= capacity_) {
    const auto oldest = std::min_element(
        parked_.begin(), parked_.end(),
        [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
    drop_locked(oldest->first);
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
  ev.data.fd = sock;
  if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, sock, &ev) != 0) {
    close_socket(sock);
    return;
  }
  const bool earliest = std::all_of(parked_.begin(), parked_.end(),
                                    [&](const auto& p) { return p.second.deadline > deadline; });
  parked_[sock] = {state, deadline, next_order_++};
  if (earliest) wake(wake_);  // the loop's wait may end later than this deadline
}

void IdleConnections::stop() {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    while (!parked_.empty()) drop_locked(parked_.begin()->first);
  }
  wake(wake_);
  if (thread_.joinable()) thread_.join();
}

size_t IdleConnections::size() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return parked_.size();
}

void IdleConnections::drop_locked(int sock) {
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, sock, nullptr);
  parked_.erase(sock);
  close_socket(sock);
}

int IdleConnections::next_wait_ms_locked() const {
  if (parked_.empty()) return -1;
  Clock::time_point first = Clock::time_point::max();
  for (const auto& [sock, p] : parked_) first = std::min(first, p.deadline);
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(first - Clock::now());
  return int(std::clamp<int64_t>(left.count() + 1, 0, 1 << 30));
}

void IdleConnections::loop() {
  std::array<epoll_event, 64> events;
  while (true) {
    int wait_ms;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      wait_ms = next_wait_ms_locked();
    }
    const int n = ::epoll_wait(epoll_, events.data(), int(events.size()), wait_ms);
    if (n < 0 && errno != EINTR) return;
    std::vector<std::pair<int, size_t>> ready;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      for (int i = 0; i < n; ++i) {
        const int sock = events[size_t(i)].data.fd;
        if (sock == wake_) {
          uint64_t count;
          [[maybe_unused]] const ssize_t r = ::read(wake_, &count, sizeof count);
          continue;
        }
        const auto it = parked_.find(sock);
        if (it == parked_.end()) continue;  // closed meanwhile (capacity)
        ::epoll_ctl(epoll_, EPOLL_CTL_DEL, sock, nullptr);
        ready.emplace_back(sock, it->second.state);
        parked_.erase(it);
      }
      const Clock::time_point now = Clock::now();
      std::vector<int> expired;
      for (const auto& [sock, p] : parked_)
        if (p.deadline <= now) expired.push_back(sock);
      for (int sock : expired) drop_locked(sock);
    }
    for (const auto& [sock, state] : ready) resume_(sock, state);
  }
}

}  // namespace tkv::server
