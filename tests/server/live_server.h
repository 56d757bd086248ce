// A live HTTP server in process for the server's tests (http_server.h):
// its own scheduler on a loaded model, a free port, the API key kKey; and
// the suites' model fixtures (stories260K, tkv-test-23M for slow jobs).
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "scheduler_test_util.h"
#include "server/http_server.h"
#include "test_util.h"

namespace tkv::server::test {

inline constexpr const char* kKey = "sk-test-key";

struct Options {
  int parallel = 2;
  int queue = 8;
  int read_timeout_seconds = 5;
  int keep_alive_seconds = 5;
  int http_threads = 0;  // 0: the server's default
  int context = 256;
  int whole_prompt_tokens = 256;
  const char* kv = "f16";
  const char* cors = "";      // --cors; empty: off
  bool chat_template = true;  // false: served as a model without one
  // A Jinja source served as the chat template instead of chatml.
  const char* template_source = nullptr;
};

// A server on a free port with its own scheduler; stopped at the end.
class LiveServer {
 public:
  LiveServer(const LoadedModel& m, Options o = {}) {
    SchedulerOptions s;
    s.context = o.context;
    s.whole_prompt_tokens = o.whole_prompt_tokens;
    EXPECT_TRUE(kv::parse_kv_shorthand(o.kv, s.kv.k, s.kv.v)) << o.kv;
    s.parallel = o.parallel;
    s.queue_capacity = o.queue;
    s.threads = 1;
    scheduler_ = std::make_unique<Scheduler>(*m.model, *m.tokenizer, s);
    ServedModel served;
    served.id = "stories260K";
    served.tokenizer = m.tokenizer.get();
    if (o.template_source)
      served.chat_template = tok::ChatTemplate::from_source(o.template_source, "test");
    else if (o.chat_template)
      served.chat_template = tok::ChatTemplate::by_name("chatml");
    served.context = s.context;
    HttpOptions h;
    h.port = 0;
    h.api_key = kKey;
    h.max_body_bytes = 64 << 10;
    h.read_timeout_seconds = o.read_timeout_seconds;
    h.write_timeout_seconds = 5;
    h.keep_alive_seconds = o.keep_alive_seconds;
    h.threads = o.http_threads;
    if (*o.cors) h.cors = CorsPolicy::parse(o.cors);
    http_ = std::make_unique<HttpServer>(served, *scheduler_, metrics_, h);
    port_ = http_->bind();
    thread_ = std::thread([this] { http_->serve(); });
  }
  ~LiveServer() {
    http_->stop_admitting();
    scheduler_->drain(std::chrono::milliseconds(0));
    http_->wait_idle(std::chrono::seconds(5));
    http_->stop();
    thread_.join();
  }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    return c;
  }
  Scheduler& scheduler() { return *scheduler_; }
  HttpServer& http() { return *http_; }
  const ServerMetrics& metrics() const { return metrics_; }
  int port() const { return port_; }

 private:
  ServerMetrics metrics_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<HttpServer> http_;
  int port_ = 0;
  std::thread thread_;
};

inline httplib::Headers auth(const std::string& key = kKey) {
  return {{"Authorization", "Bearer " + key}};
}

// The response must be an OpenAI error object with this status.
inline void expect_error(const httplib::Result& r, int status, const std::string& param = "*") {
  ASSERT_TRUE(r) << "no response: " << httplib::to_string(r.error());
  EXPECT_EQ(r->status, status) << r->body;
  const nlohmann::json body = nlohmann::json::parse(r->body, nullptr, false);
  ASSERT_TRUE(body.is_object() && body.contains("error")) << r->body;
  const nlohmann::json& e = body["error"];
  EXPECT_TRUE(e["message"].is_string()) << r->body;
  EXPECT_TRUE(e["type"].is_string()) << r->body;
  EXPECT_TRUE(e.contains("param") && e.contains("code")) << r->body;
  if (param != "*") {
    EXPECT_EQ(e["param"], param) << r->body;
  }
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
}

// The shared model of a suite, loaded once. Model::kName is its fixture.
template <typename Model>
class ModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = tkv::test::model_path(Model::kName);
    if (!path.empty()) model_ = new LoadedModel(load_model(path));
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    if (!model_) {
      TKV_MISSING_FIXTURE << "fixture " << Model::kName << " not found under "
                          << tkv::test::models_dir();
    }
  }
  static inline LoadedModel* model_ = nullptr;
};

struct Stories {
  static constexpr const char* kName = "stories260K.gguf";
};
// For jobs that must last a while (stories260K generates 200 tokens in a
// few milliseconds).
struct Slow {
  static constexpr const char* kName = "tkv-test-23M.gguf";
};
using HttpServerTest = ModelTest<Stories>;
using HttpServerSlowTest = ModelTest<Slow>;

}  // namespace tkv::server::test
