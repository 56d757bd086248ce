#include "bench/serve_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <httplib.h>

#include "common/error.h"
#include "common/timer.h"

namespace tkv::bench {

namespace {

std::string read_tail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  return text.size() > max_bytes ? text.substr(text.size() - max_bytes) : text;
}

// The port of "turbokv serve: listening on http://HOST:PORT (...)"; 0 if
// `line` is not that line.
int listening_port(const std::string& line) {
  const size_t at = line.find("listening on http://");
  if (at == std::string::npos) return 0;
  const size_t colon = line.find(':', at + std::strlen("listening on http://"));
  return colon == std::string::npos ? 0 : std::atoi(line.c_str() + colon + 1);
}

double elapsed_ms(std::chrono::steady_clock::time_point from) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - from).count();
}

}  // namespace

ServerAddress parse_server_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0)
    fail("--url: ", url, ": expected http://HOST:PORT (https is not supported)");
  std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  const std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  rest = rest.substr(0, std::min(slash, rest.size()));
  if (!path.empty() && path != "/" && path != "/v1" && path != "/v1/")
    fail("--url: ", url, ": the path may only be / or /v1 (requests go to /v1/completions)");
  const size_t colon = rest.rfind(':');
  ServerAddress a;
  a.host = rest.substr(0, colon);
  a.port = 80;
  if (colon != std::string::npos) {
    const std::string port = rest.substr(colon + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 65535)
      fail("--url: ", url, ": bad port '", port, "'");
    a.port = int(p);
  }
  if (a.host.empty()) fail("--url: ", url, ": no host");
  return a;
}

bool server_healthy(const ServerAddress& server, double seconds) {
  httplib::Client client(server.host, server.port);
  client.set_connection_timeout(std::chrono::milliseconds(500));
  Stopwatch clock;
  while (true) {
    const auto r = client.Get("/health");
    if (r && r->status == 200) return true;
    if (clock.seconds() > seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

ServerProcess::ServerProcess(const std::vector<std::string>& argv, double start_seconds, int port)
    : port_(port) {
  char err_template[] = "/tmp/turbokv-bench-serve-XXXXXX";
  const int err_fd = ::mkstemp(err_template);
  if (err_fd < 0) fail("bench serve: cannot create a temporary file: ", std::strerror(errno));
  err_path_ = err_template;
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(err_fd);
    fail("bench serve: pipe: ", std::strerror(errno));
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) fail("bench serve: fork: ", std::strerror(errno));
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err_fd);

  // The listening line, then /health.
  Stopwatch clock;
  std::string line;
  auto give_up = [&](const std::string& why) {
    ::close(out[0]);
    stop(1);
    // Its last line of output says why, usually (one line: the caller's
    // error stays one line).
    std::string tail = stderr_tail();
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
    const std::string last =
        tail.substr(tail.find_last_of('\n') == std::string::npos ? 0 : tail.find_last_of('\n') + 1);
    std::error_code ec;
    std::filesystem::remove(err_path_, ec);
    fail("bench: the server (", std::filesystem::path(argv[0]).filename().string(), ") ", why,
         last.empty() ? "" : ": " + last);
  };
  while (port_ == 0) {
    if (clock.seconds() > start_seconds) give_up("did not start listening in time");
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[512];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) give_up("exited before it listened");
    line.append(buf, size_t(n));
    for (size_t nl; port_ == 0 && (nl = line.find('\n')) != std::string::npos;) {
      port_ = listening_port(line.substr(0, nl));
      line.erase(0, nl + 1);
    }
  }
  // Kept open: the server may print more, and a closed pipe would kill it.
  stdout_fd_ = out[0];
  // /health, as long as the server lives (one that crashes while loading
  // is reported at once, not after start_seconds).
  while (!server_healthy(address(), 0.25)) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      give_up(WIFSIGNALED(status)
                  ? str("died of signal ", WTERMSIG(status), " before it answered /health")
                  : str("exited with status ", WEXITSTATUS(status), " before it answered /health"));
    }
    if (clock.seconds() > start_seconds) give_up("did not answer /health in time");
  }
}

ServerProcess::~ServerProcess() {
  stop();
  std::error_code ec;
  std::filesystem::remove(err_path_, ec);
}

uint64_t ServerProcess::peak_rss_bytes() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string key;
  while (in >> key) {
    if (key == "VmHWM:") {
      uint64_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
    std::getline(in, key);
  }
  return 0;
}

int ServerProcess::stop(double grace_seconds) {
  if (pid_ <= 0) return exit_status_;
  ::kill(pid_, SIGTERM);
  Stopwatch clock;
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (clock.seconds() > grace_seconds) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  pid_ = -1;
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  stdout_fd_ = -1;
  return exit_status_;
}

std::string ServerProcess::stderr_tail() const {
  return read_tail(err_path_, 16 * 1024);
}

StreamTiming stream_completion(const ServerAddress& server, const Json& body,
                               double timeout_seconds, std::chrono::steady_clock::time_point epoch,
                               const std::function<void()>& on_first_text) {
  StreamTiming t;
  httplib::Client client(server.host, server.port);
  client.set_read_timeout(std::chrono::milliseconds(int64_t(timeout_seconds * 1000)));
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers.emplace("Content-Type", "application/json");
  req.body = body.dump();
  std::string pending, raw;
  bool done = false;
  int64_t text_chunks = 0;
  double last_ms = -1;
  const auto start = std::chrono::steady_clock::now();
  t.sent_ms = std::chrono::duration<double, std::milli>(start - epoch).count();
  req.response_handler = [&](const httplib::Response& r) {
    t.http_status = r.status;
    return true;
  };
  // One server-sent event: "data: {chunk}" or "data: [DONE]".
  auto on_event = [&](const std::string& event, double at_ms) {
    if (event.rfind("data: ", 0) != 0) return;
    const std::string data = event.substr(6);
    if (data == "[DONE]") {
      done = true;
      return;
    }
    const Json chunk = Json::parse(data, nullptr, false);
    if (chunk.is_discarded()) {
      t.error = "unreadable chunk: " + data.substr(0, 200);
      return;
    }
    if (chunk.contains("error")) {
      t.error = chunk["error"].value("message", chunk["error"].dump());
      return;
    }
    if (chunk.contains("usage") && chunk["usage"].is_object())
      t.completion_tokens = chunk["usage"].value("completion_tokens", int64_t(0));
    const Json& choices = chunk.value("choices", Json::array());
    if (choices.empty() || choices[0].value("text", std::string()).empty()) return;
    ++text_chunks;
    t.text_at_ms.push_back(t.sent_ms + at_ms);
    if (last_ms < 0) {
      t.ttft_ms = at_ms;
      if (on_first_text) on_first_text();
    } else {
      t.itl_ms.push_back(at_ms - last_ms);
    }
    last_ms = at_ms;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const double at_ms = elapsed_ms(start);
    if (t.http_status != 200) {
      raw.append(data, n);
      return raw.size() < (1 << 20);
    }
    pending.append(data, n);
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
      on_event(pending.substr(0, end), at_ms);
      pending.erase(0, end + 2);
    }
    return true;
  };
  const auto res = client.send(req);
  t.seconds = elapsed_ms(start) / 1e3;
  if (!res) {
    t.error = "HTTP request failed: " + httplib::to_string(res.error());
    return t;
  }
  if (t.http_status != 200) {
    const Json e = Json::parse(raw, nullptr, false);
    t.error = "HTTP " + std::to_string(t.http_status) + ": " +
              (e.is_object() && e.contains("error") ? e["error"].value("message", raw) : raw);
    return t;
  }
  if (t.error.empty() && !done) t.error = "the stream ended without [DONE]";
  if (t.completion_tokens == 0) t.completion_tokens = text_chunks;
  t.ok = t.error.empty();
  return t;
}

double fetch_metric(const ServerAddress& server, const std::string& name) {
  httplib::Client client(server.host, server.port);
  const auto r = client.Get("/metrics");
  if (!r || r->status != 200) return -1;
  std::istringstream in(r->body);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + " ", 0) == 0) return std::strtod(line.c_str() + name.size() + 1, nullptr);
  return -1;
}

}  // namespace tkv::bench
