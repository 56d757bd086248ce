// IdleConnections (server/idle_connections.h) on socket pairs: a parked
// connection that becomes readable is resumed with its state, one that
// stays silent is closed at its deadline, the one parked longest is closed
// when the capacity is reached, and stop() closes the rest.
#include "server/idle_connections.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>
#include <vector>

namespace tkv::server {
namespace {

using Clock = IdleConnections::Clock;

// A connected pair: [0] is parked, [1] is the client's end.
std::pair<int, int> socket_pair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  const timeval tv{10, 0};
  ::setsockopt(fds[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return {fds[0], fds[1]};
}

// Whether the server's end of `client` was closed: a read sees the end of
// the stream (within the receive timeout of 10 s).
bool closed_by_server(int client) {
  char byte;
  return ::recv(client, &byte, 1, 0) == 0;
}

struct Resumed {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<int, size_t>> got;
  IdleConnections::Resume callback() {
    return [this](int sock, size_t state) {
      const std::lock_guard<std::mutex> lock(mu);
      got.emplace_back(sock, state);
      cv.notify_all();
    };
  }
  bool wait_for(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return got.size() >= n; });
  }
};

TEST(IdleConnections, AReadableConnectionIsResumedWithItsState) {
  Resumed resumed;
  IdleConnections idle(8, resumed.callback());
  const auto [a, a_client] = socket_pair();
  const auto [b, b_client] = socket_pair();
  idle.park(a, 7, Clock::now() + std::chrono::minutes(1));
  idle.park(b, 9, Clock::now() + std::chrono::minutes(1));
  EXPECT_EQ(idle.size(), 2u);
  ASSERT_EQ(::write(b_client, "x", 1), 1);
  ASSERT_TRUE(resumed.wait_for(1));
  EXPECT_EQ(resumed.got[0], std::make_pair(b, size_t(9)));
  EXPECT_EQ(idle.size(), 1u);
  ::close(b);  // the callee's now
  idle.stop();
  EXPECT_TRUE(closed_by_server(a_client));
  EXPECT_EQ(idle.size(), 0u);
  for (int fd : {a_client, b_client}) ::close(fd);
}

TEST(IdleConnections, ASilentConnectionIsClosedAtItsDeadline) {
  Resumed resumed;
  IdleConnections idle(8, resumed.callback());
  const auto [late, late_client] = socket_pair();
  const auto [soon, soon_client] = socket_pair();
  idle.park(late, 1, Clock::now() + std::chrono::minutes(1));
  idle.park(soon, 2, Clock::now() + std::chrono::milliseconds(50));  // wakes the loop
  EXPECT_TRUE(closed_by_server(soon_client));
  EXPECT_EQ(idle.size(), 1u);
  EXPECT_TRUE(resumed.got.empty());
  for (int fd : {late_client, soon_client}) ::close(fd);
}

TEST(IdleConnections, TheOldestIsClosedAtCapacityAndParkAfterStopCloses) {
  Resumed resumed;
  IdleConnections idle(2, resumed.callback());
  std::vector<std::pair<int, int>> pairs;
  for (int i = 0; i < 3; ++i) {
    pairs.push_back(socket_pair());
    idle.park(pairs.back().first, size_t(i), Clock::now() + std::chrono::minutes(1));
  }
  EXPECT_EQ(idle.size(), 2u);
  EXPECT_TRUE(closed_by_server(pairs[0].second));  // parked first
  ASSERT_EQ(::write(pairs[1].second, "x", 1), 1);  // still parked: resumed
  ASSERT_TRUE(resumed.wait_for(1));
  EXPECT_EQ(resumed.got[0].second, 1u);
  ::close(pairs[1].first);
  idle.stop();
  const auto [after, after_client] = socket_pair();
  idle.park(after, 0, Clock::now() + std::chrono::minutes(1));
  EXPECT_TRUE(closed_by_server(after_client));
  for (const auto& [server, client] : pairs) ::close(client);
  ::close(after_client);
}

}  // namespace
}  // namespace tkv::server
