// The routes and request fields beyond plain chat and completions, over
// raw HTTP on stories260K: GET /v1/models/{id}, logit_bias, n > 1 (whole
// and streamed, several prompts), /v1/responses, /v1/messages and
// count_tokens, reasoning_effort's warning header (chatml does not read
// it), and CORS.
#include <gtest/gtest.h>
#include <httplib.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "live_server.h"
#include "server/http_generation.h"

namespace tkv::server {
namespace {

using Json = nlohmann::json;
using test::auth;
using test::expect_error;
using test::HttpServerTest;
using test::LiveServer;
using test::Options;

Json post_json(LiveServer& server, const std::string& route, const Json& body,
               httplib::Headers headers = auth()) {
  httplib::Client c = server.client();
  const auto r = c.Post(route, headers, body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  return Json::parse(r->body, nullptr, false);
}

// The data of each server-sent event of a body, with its `event:` name
// (empty when the event has none); [DONE] as a null.
std::vector<std::pair<std::string, Json>> sse_events(const std::string& body) {
  std::vector<std::pair<std::string, Json>> out;
  std::string name;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find('\n', at);
    if (end == std::string::npos) end = body.size();
    const std::string line = body.substr(at, end - at);
    at = end + 1;
    if (line.rfind("event: ", 0) == 0) name = line.substr(7);
    if (line.rfind("data: ", 0) != 0) continue;
    const std::string data = line.substr(6);
    out.emplace_back(name, data == "[DONE]" ? Json(nullptr) : Json::parse(data, nullptr, false));
    name.clear();
  }
  return out;
}

std::string post_stream(LiveServer& server, const std::string& route, const Json& body,
                        httplib::Headers headers = auth()) {
  httplib::Client c = server.client();
  const auto r = c.Post(route, headers, body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  return r->body;
}

TEST_F(HttpServerTest, ModelsRetrieveByIdOr404) {
  LiveServer server(*model_);
  httplib::Client c = server.client();
  const auto ok = c.Get("/v1/models/stories260K", auth());
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  const Json m = Json::parse(ok->body);
  EXPECT_EQ(m["id"], "stories260K");
  EXPECT_EQ(m["object"], "model");
  EXPECT_EQ(m["owned_by"], "turbokv");
  EXPECT_TRUE(m["created"].is_number_integer());
  for (const char* path : {"/v1/models/gpt-4o", "/v1/models/org/stories260K"}) {
    SCOPED_TRACE(path);
    const auto r = c.Get(path, auth());
    expect_error(r, 404, "model");
    EXPECT_EQ(Json::parse(r->body)["error"]["code"], "model_not_found");
  }
  expect_error(c.Get("/v1/models/stories260K"), 401);  // behind the key like the list
}

TEST_F(HttpServerTest, LogitBiasSteersEveryToken) {
  LiveServer server(*model_);
  const int32_t token = 300;
  const Json r = post_json(server, "/v1/completions",
                           {{"prompt", "Once upon a time"},
                            {"max_tokens", 6},
                            {"temperature", 0},
                            {"logprobs", 0},
                            {"logit_bias", {{std::to_string(token), 100}}}});
  const Json& tokens = r["choices"][0]["logprobs"]["tokens"];
  ASSERT_EQ(tokens.size(), 6u) << r.dump();
  const std::string piece = model_->tokenizer->token_to_piece(token, /*render_special=*/true);
  for (const Json& t : tokens) EXPECT_EQ(t, piece);
  httplib::Client c = server.client();
  const Json over = {{"prompt", "x"}, {"logit_bias", {{"512", 1}}}};  // stories260K: 512 tokens
  expect_error(c.Post("/v1/completions", auth(), over.dump(), "application/json"), 400,
               "logit_bias");
}

TEST_F(HttpServerTest, PresencePenaltyChangesASampledReply) {
  LiveServer server(*model_);
  const Json base = {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"seed", 11}};
  Json with = base;
  with["frequency_penalty"] = 2;
  with["presence_penalty"] = 2;
  const std::string plain = post_json(server, "/v1/completions", base)["choices"][0]["text"];
  const std::string again = post_json(server, "/v1/completions", base)["choices"][0]["text"];
  const std::string penalized = post_json(server, "/v1/completions", with)["choices"][0]["text"];
  EXPECT_EQ(plain, again);  // seeded
  EXPECT_NE(plain, penalized);
}

TEST_F(HttpServerTest, SeveralChoicesWholeAndStreamed) {
  LiveServer server(*model_);
  const Json request = {{"prompt", "The little dog"}, {"max_tokens", 12}, {"seed", 5}, {"n", 3}};
  const Json whole = post_json(server, "/v1/completions", request);
  ASSERT_EQ(whole["choices"].size(), 3u) << whole.dump();
  std::vector<std::string> texts;
  for (int i = 0; i < 3; ++i) {
    const Json& choice = whole["choices"][size_t(i)];
    EXPECT_EQ(choice["index"], i);
    texts.push_back(choice["text"]);
    // Choice i samples with seed + i: the reply of n = 1 with that seed.
    Json alone = request;
    alone["n"] = 1;
    alone["seed"] = 5 + i;
    const Json one = post_json(server, "/v1/completions", alone);
    EXPECT_EQ(one["choices"][0]["text"], texts.back()) << i;
    // The prompt counted once, the completions of every choice.
    if (i == 0) {
      EXPECT_EQ(whole["usage"]["prompt_tokens"], one["usage"]["prompt_tokens"]);
    }
  }
  EXPECT_EQ(whole["usage"]["completion_tokens"], 36);
  // Streamed: each choice's pieces under its index, each ending once.
  Json streamed = request;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  std::map<int, std::string> got;
  std::map<int, int> finished;
  Json usage;
  for (const auto& [name, data] : sse_events(post_stream(server, "/v1/completions", streamed))) {
    if (data.is_null()) continue;
    if (!data["usage"].is_null()) usage = data["usage"];
    for (const Json& c : data["choices"]) {
      got[c["index"].get<int>()] += c["text"].get<std::string>();
      if (!c["finish_reason"].is_null()) ++finished[c["index"].get<int>()];
    }
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i], texts[size_t(i)]) << i;
    EXPECT_EQ(finished[i], 1) << i;
  }
  EXPECT_EQ(usage["completion_tokens"], 36);
  EXPECT_EQ(usage["prompt_tokens"], whole["usage"]["prompt_tokens"]);
}

TEST_F(HttpServerTest, SeveralPromptsIndexPromptTimesNPlusChoice) {
  LiveServer server(*model_);
  const Json both =
      post_json(server, "/v1/completions",
                {{"prompt", {"Once upon", "The dog"}}, {"max_tokens", 8}, {"seed", 40}, {"n", 2}});
  ASSERT_EQ(both["choices"].size(), 4u) << both.dump();
  int64_t prompt_tokens = 0;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(both["choices"][size_t(i)]["index"], i);
    const Json one = post_json(
        server, "/v1/completions",
        {{"prompt", i < 2 ? "Once upon" : "The dog"}, {"max_tokens", 8}, {"seed", 40 + i}});
    EXPECT_EQ(one["choices"][0]["text"], both["choices"][size_t(i)]["text"]) << i;
    if (i % 2 == 0) prompt_tokens += one["usage"]["prompt_tokens"].get<int64_t>();
  }
  EXPECT_EQ(both["usage"]["prompt_tokens"], prompt_tokens);
}

TEST_F(HttpServerTest, ReasoningEffortIsAcceptedWithAWarningHeader) {
  LiveServer server(*model_);
  httplib::Client c = server.client();
  const Json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                     {"max_tokens", 2},
                     {"reasoning_effort", "low"}};
  const auto r = c.Post("/v1/chat/completions", auth(), body.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->get_header_value(kWarningHeader).find("reasoning_effort"), std::string::npos);
}

Json greedy_chat(LiveServer& server, const Json& messages, int max_tokens) {
  return post_json(server, "/v1/chat/completions",
                   {{"messages", messages}, {"max_tokens", max_tokens}, {"temperature", 0}});
}

TEST_F(HttpServerTest, ResponsesWholeAndStreamed) {
  LiveServer server(*model_);
  const Json messages = {{{"role", "system"}, {"content", "Be brief."}},
                         {{"role", "user"}, {"content", "Tell a story."}}};
  const Json chat = greedy_chat(server, messages, 6);
  const std::string text = chat["choices"][0]["message"]["content"];
  const Json request = {{"instructions", "Be brief."},
                        {"input", "Tell a story."},
                        {"max_output_tokens", 6},
                        {"temperature", 0},
                        {"store", false}};
  const Json r = post_json(server, "/v1/responses", request);
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(r["output"][0]["type"], "message");
  EXPECT_EQ(r["output"][0]["content"][0]["type"], "output_text");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], text);
  EXPECT_EQ(r["status"],
            chat["choices"][0]["finish_reason"] == "length" ? "incomplete" : "completed");
  EXPECT_EQ(r["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
  EXPECT_EQ(r["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
  // Message items give the same prompt.
  Json items = request;
  items.erase("instructions");
  items["input"] = {{{"role", "developer"}, {"content", "Be brief."}},
                    {{"type", "message"},
                     {"role", "user"},
                     {"content", {{{"type", "input_text"}, {"text", "Tell a story."}}}}}};
  EXPECT_EQ(post_json(server, "/v1/responses", items)["output"][0]["content"][0]["text"], text);

  Json streamed = request;
  streamed["stream"] = true;
  std::vector<std::string> names;
  std::string deltas;
  int64_t sequence = -1;
  for (const auto& [name, data] : sse_events(post_stream(server, "/v1/responses", streamed))) {
    ASSERT_FALSE(data.is_null()) << "no [DONE] in a Responses stream";
    EXPECT_EQ(data["type"], name);
    EXPECT_EQ(data["sequence_number"], sequence + 1);
    sequence = data["sequence_number"];
    if (names.empty() || names.back() != name) names.push_back(name);
    if (name == "response.output_text.delta") deltas += data["delta"].get<std::string>();
    if (name == "response.output_text.done") {
      EXPECT_EQ(data["text"], text);
    }
  }
  const std::vector<std::string> expected = {
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      r["status"] == "incomplete" ? "response.incomplete" : "response.completed"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(deltas, text);
  httplib::Client c = server.client();
  expect_error(c.Post("/v1/responses", auth(), R"({"input": "x", "tools": [{"type": "function"}]})",
                      "application/json"),
               400, "tools[0].name");
  expect_error(
      c.Post("/v1/responses", auth(),
             R"({"input": "x", "tools": [{"type": "web_search_preview"}]})", "application/json"),
      400, "tools[0].type");
  expect_error(c.Post("/v1/responses", auth(), R"({"input": "x", "bogus": 1})", "application/json"),
               400, "bogus");
  expect_error(c.Post("/v1/responses", auth(), R"({"max_output_tokens": 3})", "application/json"),
               400, "input");
}

// An Anthropic error object of this status and type.
void expect_anthropic_error(const httplib::Result& r, int status, const std::string& type) {
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status) << r->body;
  const Json body = Json::parse(r->body, nullptr, false);
  EXPECT_EQ(body["type"], "error") << r->body;
  EXPECT_EQ(body["error"]["type"], type) << r->body;
  EXPECT_TRUE(body["error"]["message"].is_string()) << r->body;
}

TEST_F(HttpServerTest, AnthropicMessagesWholeStreamedAndCounted) {
  LiveServer server(*model_);
  const httplib::Headers key = {{"x-api-key", test::kKey}, {"anthropic-version", "2023-06-01"}};
  const Json chat = greedy_chat(server,
                                {{{"role", "system"}, {"content", "Be brief."}},
                                 {{"role", "user"}, {"content", "Tell a story."}}},
                                6);
  const std::string text = chat["choices"][0]["message"]["content"];
  const Json request = {{"model", "claude"},
                        {"max_tokens", 6},
                        {"temperature", 0},
                        {"system", {{{"type", "text"}, {"text", "Be brief."}}}},
                        {"messages", {{{"role", "user"}, {"content", "Tell a story."}}}}};
  const Json m = post_json(server, "/v1/messages", request, key);
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(m["content"][0]["type"], "text");
  EXPECT_EQ(m["content"][0]["text"], text);
  EXPECT_EQ(m["stop_reason"],
            chat["choices"][0]["finish_reason"] == "length" ? "max_tokens" : "end_turn");
  EXPECT_EQ(m["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
  EXPECT_EQ(m["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);

  Json streamed = request;
  streamed["stream"] = true;
  std::vector<std::string> names;
  std::string deltas;
  for (const auto& [name, data] : sse_events(post_stream(server, "/v1/messages", streamed, key))) {
    EXPECT_EQ(data["type"], name);
    if (names.empty() || names.back() != name) names.push_back(name);
    if (name == "content_block_delta") deltas += data["delta"]["text"].get<std::string>();
    if (name == "message_start") {
      EXPECT_EQ(data["message"]["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
    }
    if (name == "message_delta") {
      EXPECT_EQ(data["delta"]["stop_reason"], m["stop_reason"]);
    }
  }
  const std::vector<std::string> expected = {
      "message_start",      "content_block_start", "ping",        "content_block_delta",
      "content_block_stop", "message_delta",       "message_stop"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(deltas, text);

  // Tool blocks reach the template as the turn's tool calls and tool
  // results (this template has no call syntax: the tools are offered, the
  // reply is text, and a required call is a 400).
  Json tools = request;
  tools["messages"] = {
      {{"role", "user"}, {"content", "Weather?"}},
      {{"role", "assistant"},
       {"content", {{{"type", "tool_use"}, {"id", "t1"}, {"name", "w"}, {"input", {{"c", 1}}}}}}},
      {{"role", "user"},
       {"content", {{{"type", "tool_result"}, {"tool_use_id", "t1"}, {"content", "sunny"}}}}}};
  EXPECT_EQ(post_json(server, "/v1/messages", tools, key)["type"], "message");
  tools["tools"] = {{{"name", "w"}, {"input_schema", {{"type", "object"}}}}};
  tools["tool_choice"] = {{"type", "any"}};
  httplib::Client tc = server.client();
  const auto refused = tc.Post("/v1/messages", key, tools.dump(), "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400) << refused->body;
  tools["tools"] = {{{"name", "w"}, {"type", "bash_20250124"}}};
  const auto server_tool = tc.Post("/v1/messages", key, tools.dump(), "application/json");
  ASSERT_TRUE(server_tool);
  EXPECT_EQ(server_tool->status, 400) << server_tool->body;

  const Json counted = post_json(server, "/v1/messages/count_tokens",
                                 {{"model", "claude"},
                                  {"system", "Be brief."},
                                  {"messages", {{{"role", "user"}, {"content", "Tell a story."}}}}},
                                 key);
  EXPECT_EQ(counted["input_tokens"], chat["usage"]["prompt_tokens"]);

  httplib::Client c = server.client();
  Json no_max = request;
  no_max.erase("max_tokens");
  expect_anthropic_error(c.Post("/v1/messages", key, no_max.dump(), "application/json"), 400,
                         "invalid_request_error");
  expect_anthropic_error(c.Post("/v1/messages", request.dump(), "application/json"), 401,
                         "authentication_error");
  Json image = request;
  image["messages"] = {{{"role", "user"}, {"content", {{{"type", "image"}}}}}};
  expect_anthropic_error(c.Post("/v1/messages", key, image.dump(), "application/json"), 400,
                         "invalid_request_error");
}

// A browser's preflight of a POST from `origin`.
httplib::Result preflight_post(httplib::Client& c, const char* route, const char* origin) {
  return c.Options(route, {{"Origin", origin}, {"Access-Control-Request-Method", "POST"}});
}

TEST_F(HttpServerTest, CorsPreflightAndHeaders) {
  Options o;
  o.cors = "http://app.example,http://localhost:3000";
  LiveServer server(*model_, o);
  httplib::Client c = server.client();
  const httplib::Headers preflight = {
      {"Origin", "http://app.example"},
      {"Access-Control-Request-Method", "POST"},
      {"Access-Control-Request-Headers", "authorization, content-type"}};
  // No key on a preflight: browsers send none.
  const auto p = c.Options("/v1/chat/completions", preflight);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->status, 204);
  EXPECT_EQ(p->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_NE(p->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_EQ(p->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  EXPECT_EQ(p->get_header_value("Access-Control-Allow-Credentials"), "true");
  const auto other = preflight_post(c, "/v1/chat/completions", "http://evil.example");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 403);
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
  // Responses to an allowed origin carry the header, errors included.
  httplib::Headers h = auth();
  h.emplace("Origin", "http://localhost:3000");
  const auto models = c.Get("/v1/models", h);
  ASSERT_TRUE(models);
  EXPECT_EQ(models->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
  EXPECT_EQ(models->get_header_value("Vary"), "Origin");
  EXPECT_EQ(models->get_header_value("Access-Control-Expose-Headers"), "X-Turbokv-Warning");
  const auto unauthorized = c.Get("/v1/models", {{"Origin", "http://localhost:3000"}});
  ASSERT_TRUE(unauthorized);
  EXPECT_EQ(unauthorized->status, 401);
  EXPECT_EQ(unauthorized->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
  EXPECT_FALSE(c.Get("/v1/models", auth())->has_header("Access-Control-Allow-Origin"));
  h = auth();
  h.emplace("Origin", "http://evil.example");
  EXPECT_FALSE(c.Get("/v1/models", h)->has_header("Access-Control-Allow-Origin"));
}

TEST_F(HttpServerTest, CorsAnyOriginNeverAllowsCredentials) {
  Options o;
  o.cors = "*";
  LiveServer server(*model_, o);
  httplib::Client c = server.client();
  const auto p = preflight_post(c, "/v1/completions", "http://x.example");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->status, 204);
  EXPECT_EQ(p->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_FALSE(p->has_header("Access-Control-Allow-Credentials"));
}

TEST_F(HttpServerTest, CorsOffByDefault) {
  LiveServer server(*model_);
  httplib::Client c = server.client();
  const auto p = preflight_post(c, "/v1/completions", "http://x.example");
  ASSERT_TRUE(p);
  EXPECT_NE(p->status, 204);
  EXPECT_FALSE(p->has_header("Access-Control-Allow-Origin"));
  httplib::Headers h = auth();
  h.emplace("Origin", "http://x.example");
  EXPECT_FALSE(c.Get("/v1/models", h)->has_header("Access-Control-Allow-Origin"));
}

TEST(CorsPolicy, BadSpecsAreOneLineErrors) {
  EXPECT_THROW(CorsPolicy::parse(""), Error);
  EXPECT_THROW(CorsPolicy::parse("app.example"), Error);
  EXPECT_THROW(CorsPolicy::parse("http://a.example/path"), Error);
  EXPECT_THROW(CorsPolicy::parse("http://a.example,,http://b.example"), Error);
  const CorsPolicy p = CorsPolicy::parse("http://a.example/, https://b.example:8443");
  EXPECT_TRUE(p.allows("http://a.example"));
  EXPECT_TRUE(p.allows("https://b.example:8443"));
  EXPECT_FALSE(p.allows("https://b.example"));
  EXPECT_FALSE(p.allows(""));
}

}  // namespace
}  // namespace tkv::server
