// What bench serve needs to drive a live `turbokv serve`: the server as a
// child process (started on port 0, its port read from the listening line,
// its peak RSS read from /proc before it is stopped), and an HTTP client
// that streams one completion and times the server-sent events as they
// arrive.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/json.h"

namespace tkv::bench {

// Where the clients send their requests: the `turbokv serve` a cell
// started, or any OpenAI-compatible server (bench serve --url).
struct ServerAddress {
  std::string host = "127.0.0.1";
  int port = 0;
};
// http://HOST:PORT, optionally ending in "/" or "/v1" (the API's base URL
// as OpenAI clients take it); tkv::Error naming what is wrong.
ServerAddress parse_server_url(const std::string& url);

// `turbokv serve ...` running in the background. The child gets SIGKILL
// when the process that started it dies (a cell killed for a timeout does
// not leave a server behind).
class ServerProcess {
 public:
  // Starts argv (argv[0] the binary) and waits up to `start_seconds` for
  // the "listening on http://HOST:PORT" line on its stdout (or, given the
  // `port` argv makes it listen on, for nothing: another server such as
  // llama-server), then for GET /health to answer 200. Throws tkv::Error
  // with the server's last stderr lines when it exits or does not come up.
  ServerProcess(const std::vector<std::string>& argv, double start_seconds, int port = 0);
  ~ServerProcess();  // stop()
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  ServerAddress address() const { return {"127.0.0.1", port_}; }
  pid_t pid() const { return pid_; }
  // VmHWM of the server from /proc/PID/status (0 where unavailable).
  uint64_t peak_rss_bytes() const;
  // SIGTERM (the server drains and exits), SIGKILL after `grace_seconds`;
  // returns the exit status (-1 when killed). Idempotent.
  int stop(double grace_seconds = 10);
  // The server's stderr so far (its last 16 KiB).
  std::string stderr_tail() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_status_ = -1;
  int stdout_fd_ = -1;
  std::string err_path_;
};

// One streamed completion as the client saw it.
struct StreamTiming {
  bool ok = false;
  int http_status = 0;
  std::string error;              // why it failed ("" when ok)
  double ttft_ms = 0;             // request sent -> first chunk with text
  std::vector<double> itl_ms;     // gaps between consecutive text chunks
  int64_t completion_tokens = 0;  // from the usage chunk (else the text chunks)
  double seconds = 0;             // request sent -> [DONE]
  // On the caller's clock (`epoch`), so that streams can be lined up: when
  // the request was sent and when each text chunk arrived.
  double sent_ms = 0;
  std::vector<double> text_at_ms;
};

// POSTs `body` (a /v1/completions request with "stream": true) to
// `server` and times its chunks; `on_first_text` (if set) runs when the
// first text chunk arrives. Never throws.
StreamTiming stream_completion(const ServerAddress& server, const Json& body,
                               double timeout_seconds, std::chrono::steady_clock::time_point epoch,
                               const std::function<void()>& on_first_text = {});

// GET /health answers 200 within `seconds`.
bool server_healthy(const ServerAddress& server, double seconds);

// The value of one sample of the Prometheus text at GET /metrics
// ("turbokv_kv_cache_used_bytes"); -1 when it cannot be read (a server
// without that metric included).
double fetch_metric(const ServerAddress& server, const std::string& name);

}  // namespace tkv::bench
