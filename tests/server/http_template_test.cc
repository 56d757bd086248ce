// Chat templates through the HTTP front end on stories260K: POST
// /apply-template, chat_template_kwargs and reasoning_effort as template
// variables on every chat route, and a model served without a template
// refusing chats on every route.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

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

// POST /apply-template answers a chat body with the rendered prompt, the
// request's chat_template_kwargs among the template's variables.
TEST_F(HttpServerTest, ApplyTemplateReturnsThePrompt) {
  LiveServer server(*model_);
  httplib::Client c = server.client();
  Json request = {
      {"messages",
       {{{"role", "system"}, {"content", "S"}}, {{"role", "user"}, {"content", "Hi"}}}}};
  auto r = c.Post("/apply-template", auth(), request.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Json::parse(r->body), (Json{{"prompt",
                                         "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|"
                                         "im_end|>\n<|im_start|>assistant\n"}}));
  request["chat_template_kwargs"] = {{"add_generation_prompt", false}};
  r = c.Post("/apply-template", auth(), request.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(Json::parse(r->body)["prompt"],
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  request["chat_template_kwargs"] = "yes";
  expect_error(c.Post("/apply-template", auth(), request.dump(), "application/json"), 400,
               "chat_template_kwargs");
  expect_error(c.Post("/apply-template", auth(), "{}", "application/json"), 400, "messages");
  auto get = c.Get("/apply-template", auth());
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
}

// The tools reach the template under every tool_choice, "none" included
// (as llama-server renders them): an agent's closing "none" turn keeps its
// earlier turns' prompt.
TEST_F(HttpServerTest, ToolsReachTheTemplateUnderEveryToolChoice) {
  Options o;
  o.template_source =
      "{% for t in tools %}[{{ t.function.name }}]{% endfor %}"
      "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}";
  LiveServer server(*model_, o);
  httplib::Client c = server.client();
  Json request = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                  {"tools",
                   {{{"type", "function"},
                     {"function", {{"name", "search"}, {"parameters", {{"type", "object"}}}}}}}}};
  for (const char* choice : {"auto", "none", "required"}) {
    request["tool_choice"] = choice;
    auto r = c.Post("/apply-template", auth(), request.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(Json::parse(r->body)["prompt"], "[search]user: Hi\n") << choice;
  }
}

// A model without a chat template (and none given) refuses chat requests,
// saying what to do; completions still work.
TEST_F(HttpServerTest, WithoutATemplateChatIsRefused) {
  Options o;
  o.chat_template = false;
  LiveServer server(*model_, o);
  httplib::Client c = server.client();
  const Json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
  for (const char* route : {"/v1/chat/completions", "/apply-template"}) {
    auto r = c.Post(route, auth(), chat.dump(), "application/json");
    expect_error(r, 501, "messages");
    EXPECT_NE(r->body.find("--chat-template"), std::string::npos) << r->body;
  }
  // The Responses and Messages routes render chats too: the same 501, in
  // their own error shapes.
  expect_error(c.Post("/v1/responses", auth(), Json{{"input", "Hi"}}.dump(), "application/json"),
               501, "messages");
  const Json messages = {{"model", "claude"},
                         {"max_tokens", 2},
                         {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  for (const char* route : {"/v1/messages", "/v1/messages/count_tokens"}) {
    auto r = c.Post(route, auth(), messages.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 501) << route << ": " << r->body;
    const Json body = Json::parse(r->body, nullptr, false);
    EXPECT_EQ(body["type"], "error") << r->body;
    EXPECT_NE(body["error"]["message"].get<std::string>().find("--chat-template"),
              std::string::npos)
        << r->body;
  }
  auto r = c.Post("/v1/completions", auth(), Json{{"prompt", "Once"}, {"max_tokens", 2}}.dump(),
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// A template that reads reasoning_effort: the messages' text, then the
// effort when the request gives one.
constexpr const char* kEffortTemplate =
    "{% for m in messages %}{{ m.content }}\n{% endfor %}"
    "{% if reasoning_effort is defined %}effort: {{ reasoning_effort }}\n{% endif %}";

Json post_ok(httplib::Client& c, const std::string& route, const Json& body,
             std::string* warning = nullptr) {
  const auto r = c.Post(route, auth(), body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  if (warning) *warning = r->get_header_value(kWarningHeader);
  return Json::parse(r->body, nullptr, false);
}

// POST /tokenize and /detokenize (llama-server's): the ids of the rendered
// chat prompt with add_special are the ids the chat request counts; pieces
// join to the text; detokenize undoes tokenize; bad bodies are 400s naming
// the field.
TEST_F(HttpServerTest, TokenizeGivesTheIdsAChatPromptCounts) {
  LiveServer server(*model_);
  httplib::Client c = server.client();
  const Json chat = {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                     {"max_tokens", 1}};
  const std::string prompt = post_ok(c, "/apply-template", chat)["prompt"];
  const Json ids = post_ok(c, "/tokenize", {{"content", prompt}, {"add_special", true}})["tokens"];
  ASSERT_TRUE(ids.is_array());
  EXPECT_EQ(int64_t(ids.size()),
            post_ok(c, "/v1/chat/completions", chat)["usage"]["prompt_tokens"].get<int64_t>());
  // Without add_special: the same ids but the vocabulary's BOS.
  const Json bare_ids = post_ok(c, "/tokenize", {{"content", prompt}})["tokens"];
  ASSERT_EQ(bare_ids.size() + 1, ids.size());
  EXPECT_EQ(bare_ids, Json(std::vector<Json>(ids.begin() + 1, ids.end())));

  const Json text = post_ok(c, "/tokenize", {{"content", "Hello world"}, {"with_pieces", true}});
  std::string joined;
  Json bare = Json::array();
  for (const Json& t : text["tokens"]) {
    joined += t["piece"].get<std::string>();
    bare.push_back(t["id"]);
  }
  EXPECT_NE(joined.find("Hello world"), std::string::npos) << joined;
  EXPECT_EQ(post_ok(c, "/detokenize", {{"tokens", bare}})["content"], "Hello world");

  const auto post = [&](const char* route, const Json& body) {
    return c.Post(route, auth(), body.dump(), "application/json");
  };
  expect_error(post("/tokenize", Json::object()), 400, "content");
  expect_error(post("/tokenize", {{"content", 5}}), 400, "content");
  expect_error(post("/tokenize", {{"content", "x"}, {"add_special", "yes"}}), 400, "add_special");
  expect_error(post("/tokenize", {{"content", "x"}, {"bogus", 1}}), 400);
  expect_error(post("/detokenize", {{"tokens", {1, -1}}}), 400, "tokens[1]");
  expect_error(post("/detokenize", {{"tokens", {1, 1 << 30}}}), 400, "tokens[1]");
  expect_error(post("/detokenize", {{"tokens", "1 2"}}), 400, "tokens");
  auto r = c.Post("/tokenize", auth(), "{not json", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  r = c.Post("/tokenize", {}, Json{{"content", "x"}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401) << "the key is needed";
}

// reasoning_effort (chat) and reasoning.effort (Responses) reach the
// template as the variable reasoning_effort, without the "ignored"
// warning; a chat_template_kwargs entry of that name wins.
TEST_F(HttpServerTest, ReasoningEffortReachesTheTemplate) {
  Options o;
  o.template_source = kEffortTemplate;
  LiveServer server(*model_, o);
  httplib::Client c = server.client();
  Json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
  const int64_t plain =
      post_ok(c, "/v1/chat/completions", chat)["usage"]["prompt_tokens"].get<int64_t>();
  chat["reasoning_effort"] = "low";
  EXPECT_EQ(post_ok(c, "/apply-template", chat)["prompt"], "Hi\neffort: low\n");
  std::string warning = "unset";
  const Json reply = post_ok(c, "/v1/chat/completions", chat, &warning);
  EXPECT_GT(reply["usage"]["prompt_tokens"].get<int64_t>(), plain) << reply.dump();
  EXPECT_EQ(warning, "");
  chat["chat_template_kwargs"] = {{"reasoning_effort", "high"}};
  EXPECT_EQ(post_ok(c, "/apply-template", chat)["prompt"], "Hi\neffort: high\n");

  Json responses = {{"input", "Hi"}, {"max_output_tokens", 2}};
  const int64_t plain_input =
      post_ok(c, "/v1/responses", responses)["usage"]["input_tokens"].get<int64_t>();
  responses["reasoning"] = {{"effort", "low"}};
  warning = "unset";
  const Json response = post_ok(c, "/v1/responses", responses, &warning);
  EXPECT_EQ(response["usage"]["input_tokens"].get<int64_t>(),
            reply["usage"]["prompt_tokens"].get<int64_t>())
      << response.dump();
  EXPECT_GT(response["usage"]["input_tokens"].get<int64_t>(), plain_input);
  EXPECT_EQ(warning, "");
}

// A template that never reads reasoning_effort (chatml) leaves it without
// effect, and the warning header says so on both routes.
TEST_F(HttpServerTest, ReasoningEffortUnreadIsWarned) {
  LiveServer server(*model_);
  httplib::Client c = server.client();
  std::string warning;
  post_ok(c, "/v1/responses",
          {{"input", "Hi"}, {"max_output_tokens", 2}, {"reasoning", {{"effort", "low"}}}},
          &warning);
  EXPECT_NE(warning.find("reasoning.effort is ignored"), std::string::npos) << warning;
  const Json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                     {"reasoning_effort", "low"}};
  EXPECT_EQ(post_ok(c, "/apply-template", chat)["prompt"],
            post_ok(c, "/apply-template", {{"messages", chat["messages"]}})["prompt"]);
}

}  // namespace
}  // namespace tkv::server
