// Response bodies: the field names and JSON types the openai client reads,
// usage arithmetic, finish_reason values, logprob shapes and SSE framing.
#include "server/api_response.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace tkv::server {
namespace {

ResponseMeta meta(Endpoint endpoint) {
  ResponseMeta m;
  m.id = response_id(endpoint, 0x1234abcdULL);
  m.model = "tkv-test-23M";
  m.created = 1700000000;
  return m;
}

void expect_envelope(const Json& j, const char* object, Endpoint endpoint) {
  EXPECT_EQ(j.at("id"), response_id(endpoint, 0x1234abcdULL));
  EXPECT_EQ(j.at("object"), object);
  EXPECT_TRUE(j.at("created").is_number_integer());
  EXPECT_EQ(j.at("created"), 1700000000);
  EXPECT_EQ(j.at("model"), "tkv-test-23M");
  EXPECT_TRUE(j.at("choices").is_array());
}

Usage usage(int64_t prompt, int64_t completion, int64_t cached) {
  Usage u;
  u.prompt_tokens = prompt;
  u.completion_tokens = completion;
  u.cached_tokens = cached;
  return u;
}

std::vector<TokenLogprob> two_tokens() {
  return {{"Hel", -0.25, {{"Hel", -0.25}, {"Hi", -1.5}}}, {"lo", -0.5, {{"lo", -0.5}}}};
}

TEST(ApiResponse, ResponseIds) {
  EXPECT_EQ(response_id(Endpoint::kChatCompletions, 255), "chatcmpl-00000000000000ff");
  EXPECT_EQ(response_id(Endpoint::kCompletions, UINT64_MAX), "cmpl-ffffffffffffffff");
}

TEST(ApiResponse, FinishReasons) {
  EXPECT_EQ(finish_reason_json(FinishReason::kStop), "stop");
  EXPECT_EQ(finish_reason_json(FinishReason::kLength), "length");
  EXPECT_TRUE(finish_reason_json(FinishReason::kNone).is_null());
}

TEST(ApiResponse, UsageArithmetic) {
  const Json u = usage_json(usage(3000, 64, 2944));
  EXPECT_EQ(u.at("prompt_tokens"), 3000);
  EXPECT_EQ(u.at("completion_tokens"), 64);
  EXPECT_EQ(u.at("total_tokens"), 3064);
  EXPECT_EQ(u.at("prompt_tokens_details").at("cached_tokens"), 2944);
  EXPECT_EQ(u.size(), 4u);
}

TEST(ApiResponse, ChatCompletionShape) {
  CompletionChoice choice;
  choice.text = "Hello";
  choice.finish_reason = FinishReason::kLength;
  const Json j = chat_completion_json(meta(Endpoint::kChatCompletions), choice, usage(10, 2, 0));
  expect_envelope(j, "chat.completion", Endpoint::kChatCompletions);
  ASSERT_EQ(j.at("choices").size(), 1u);
  const Json& c = j.at("choices")[0];
  EXPECT_EQ(c.at("index"), 0);
  EXPECT_EQ(c.at("message").at("role"), "assistant");
  EXPECT_EQ(c.at("message").at("content"), "Hello");
  EXPECT_TRUE(c.at("message").at("refusal").is_null());
  EXPECT_TRUE(c.at("logprobs").is_null());
  EXPECT_EQ(c.at("finish_reason"), "length");
  EXPECT_EQ(j.at("usage").at("total_tokens"), 12);
  EXPECT_EQ(j.at("usage").at("prompt_tokens_details").at("cached_tokens"), 0);
}

TEST(ApiResponse, ChatLogprobsShape) {
  CompletionChoice choice;
  choice.text = "Hello";
  choice.logprobs_requested = true;
  choice.logprobs = two_tokens();
  const Json j = chat_completion_json(meta(Endpoint::kChatCompletions), choice, {});
  const Json& lp = j.at("choices")[0].at("logprobs");
  EXPECT_TRUE(lp.at("refusal").is_null());
  const Json& content = lp.at("content");
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0].at("token"), "Hel");
  EXPECT_EQ(content[0].at("logprob"), -0.25);
  EXPECT_EQ(content[0].at("bytes"), Json::array({72, 101, 108}));
  ASSERT_EQ(content[0].at("top_logprobs").size(), 2u);
  EXPECT_EQ(content[0].at("top_logprobs")[1].at("token"), "Hi");
  EXPECT_EQ(content[0].at("top_logprobs")[1].at("logprob"), -1.5);
  EXPECT_EQ(content[0].at("top_logprobs")[1].at("bytes"), Json::array({72, 105}));
  EXPECT_EQ(content[1].at("top_logprobs").size(), 1u);
  // top_logprobs: 0 gives an empty list, not a missing field.
  const Json none = chat_logprobs_json({{"x", -1.0, {}}});
  EXPECT_TRUE(none.at("content")[0].at("top_logprobs").is_array());
  EXPECT_TRUE(none.at("content")[0].at("top_logprobs").empty());
}

TEST(ApiResponse, LogprobsAreFiniteNumbers) {
  const double inf = std::numeric_limits<double>::infinity();
  const Json chat = chat_logprobs_json({{"a", -inf, {{"b", std::nan("")}}}});
  EXPECT_EQ(chat.at("content")[0].at("logprob"), -9999.0);
  EXPECT_EQ(chat.at("content")[0].at("top_logprobs")[0].at("logprob"), -9999.0);
  const Json completion = completion_logprobs_json({{"a", -inf, {}}}, 0);
  EXPECT_EQ(completion.at("token_logprobs")[0], -9999.0);
  EXPECT_EQ(completion.at("top_logprobs")[0].at("a"), -9999.0);
}

TEST(ApiResponse, BytesOfPartialUtf8Token) {
  // The first byte of "é" alone: bytes carries it exactly, the token string
  // serializes as U+FFFD.
  const Json lp = chat_logprobs_json({{"\xc3", -0.1, {}}});
  EXPECT_EQ(lp.at("content")[0].at("bytes"), Json::array({0xc3}));
  EXPECT_THROW((void)lp.dump(), Json::type_error);  // what to_json_text avoids
  const std::string text = to_json_text(lp);
  EXPECT_NE(text.find("\xef\xbf\xbd"), std::string::npos) << text;
  EXPECT_TRUE(Json::parse(text).is_object());
}

TEST(ApiResponse, TextCompletionShape) {
  CompletionChoice choice;
  choice.text = "Hello";
  choice.finish_reason = FinishReason::kStop;
  choice.logprobs_requested = true;
  choice.logprobs = two_tokens();
  const Json j = text_completion_json(meta(Endpoint::kCompletions), choice, usage(4, 2, 1),
                                      /*prompt_bytes=*/9);
  expect_envelope(j, "text_completion", Endpoint::kCompletions);
  const Json& c = j.at("choices")[0];
  EXPECT_EQ(c.at("text"), "Hello");
  EXPECT_EQ(c.at("index"), 0);
  EXPECT_EQ(c.at("finish_reason"), "stop");
  const Json& lp = c.at("logprobs");
  EXPECT_EQ(lp.at("tokens"), Json::array({"Hel", "lo"}));
  EXPECT_EQ(lp.at("token_logprobs"), Json::array({-0.25, -0.5}));
  ASSERT_EQ(lp.at("top_logprobs").size(), 2u);
  EXPECT_TRUE(lp.at("top_logprobs")[0].is_object());
  EXPECT_EQ(lp.at("top_logprobs")[0].size(), 2u);
  EXPECT_EQ(lp.at("top_logprobs")[0].at("Hi"), -1.5);
  EXPECT_EQ(lp.at("text_offset"), Json::array({9, 12}));  // the prompt's bytes, then "Hel"
  EXPECT_EQ(j.at("usage").at("total_tokens"), 6);
  EXPECT_EQ(j.at("usage").at("prompt_tokens_details").at("cached_tokens"), 1);
}

TEST(ApiResponse, CompletionTopLogprobsListTheChosenToken) {
  // Sampled with temperature: the chosen token need not be among the top.
  const Json lp = completion_logprobs_json({{"z", -4.0, {{"a", -0.1}, {"b", -0.2}}}}, 0);
  const Json& top = lp.at("top_logprobs")[0];
  EXPECT_EQ(top.size(), 3u);
  EXPECT_EQ(top.at("z"), -4.0);
}

TEST(ApiResponse, ChatStream) {
  const ResponseMeta m = meta(Endpoint::kChatCompletions);
  StreamPiece first;
  first.first = true;
  Json j = chat_chunk_json(m, first, false);
  expect_envelope(j, "chat.completion.chunk", Endpoint::kChatCompletions);
  EXPECT_FALSE(j.contains("usage"));
  const Json& c0 = j.at("choices")[0];
  EXPECT_EQ(c0.at("index"), 0);
  EXPECT_EQ(c0.at("delta"), (Json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(c0.at("logprobs").is_null());
  EXPECT_TRUE(c0.at("finish_reason").is_null());

  StreamPiece mid;
  mid.text = "Hel";
  mid.logprobs_requested = true;
  mid.logprobs = {two_tokens()[0]};
  j = chat_chunk_json(m, mid, true);
  EXPECT_TRUE(j.contains("usage"));
  EXPECT_TRUE(j.at("usage").is_null());
  EXPECT_EQ(j.at("choices")[0].at("delta"), (Json{{"content", "Hel"}}));
  EXPECT_EQ(j.at("choices")[0].at("logprobs").at("content")[0].at("token"), "Hel");
  EXPECT_TRUE(j.at("choices")[0].at("finish_reason").is_null());

  StreamPiece last;
  last.finish_reason = FinishReason::kStop;
  j = chat_chunk_json(m, last, false);
  EXPECT_TRUE(j.at("choices")[0].at("delta").is_object());
  EXPECT_TRUE(j.at("choices")[0].at("delta").empty());
  EXPECT_EQ(j.at("choices")[0].at("finish_reason"), "stop");
  last.text = "!";  // text still held back at the end goes in the last chunk
  j = chat_chunk_json(m, last, false);
  EXPECT_EQ(j.at("choices")[0].at("delta"), (Json{{"content", "!"}}));

  j = chat_usage_chunk_json(m, usage(5, 3, 2));
  expect_envelope(j, "chat.completion.chunk", Endpoint::kChatCompletions);
  EXPECT_TRUE(j.at("choices").empty());
  EXPECT_EQ(j.at("usage").at("total_tokens"), 8);
  EXPECT_EQ(j.at("usage").at("prompt_tokens_details").at("cached_tokens"), 2);
}

TEST(ApiResponse, CompletionStream) {
  const ResponseMeta m = meta(Endpoint::kCompletions);
  StreamPiece piece;
  piece.text = "lo";
  piece.logprobs_requested = true;
  piece.logprobs = {two_tokens()[1]};
  piece.text_offset_start = 12;
  Json j = completion_chunk_json(m, piece, true);
  expect_envelope(j, "text_completion", Endpoint::kCompletions);
  EXPECT_TRUE(j.at("usage").is_null());
  const Json& c = j.at("choices")[0];
  EXPECT_EQ(c.at("text"), "lo");
  EXPECT_EQ(c.at("index"), 0);
  EXPECT_TRUE(c.at("finish_reason").is_null());
  EXPECT_EQ(c.at("logprobs").at("text_offset"), Json::array({12}));
  StreamPiece last;
  last.finish_reason = FinishReason::kLength;
  j = completion_chunk_json(m, last, false);
  EXPECT_FALSE(j.contains("usage"));
  EXPECT_EQ(j.at("choices")[0].at("text"), "");
  EXPECT_EQ(j.at("choices")[0].at("finish_reason"), "length");
  j = completion_usage_chunk_json(m, usage(1, 1, 0));
  EXPECT_EQ(j.at("object"), "text_completion");
  EXPECT_TRUE(j.at("choices").empty());
  EXPECT_EQ(j.at("usage").at("total_tokens"), 2);
}

TEST(ApiResponse, ErrorBody) {
  Json j = error_json(make_api_error(400, "Invalid value for 'n'", "n", "unsupported_value"));
  ASSERT_EQ(j.size(), 1u);
  const Json& e = j.at("error");
  EXPECT_EQ(e.at("message"), "Invalid value for 'n'");
  EXPECT_EQ(e.at("type"), "invalid_request_error");
  EXPECT_EQ(e.at("param"), "n");
  EXPECT_EQ(e.at("code"), "unsupported_value");
  j = error_json(make_api_error(401, "Incorrect API key provided."));
  EXPECT_EQ(j.at("error").at("type"), "authentication_error");
  EXPECT_TRUE(j.at("error").at("param").is_null());
  EXPECT_TRUE(j.at("error").at("code").is_null());
  EXPECT_TRUE(j.at("error").contains("param"));  // present as null, as OpenAI sends it
}

TEST(ApiResponse, ModelList) {
  const Json j = model_list_json({{"tkv-test-23M", 1700000000, "turbokv"}});
  EXPECT_EQ(j.at("object"), "list");
  ASSERT_EQ(j.at("data").size(), 1u);
  const Json& m = j.at("data")[0];
  EXPECT_EQ(m.at("id"), "tkv-test-23M");
  EXPECT_EQ(m.at("object"), "model");
  EXPECT_EQ(m.at("created"), 1700000000);
  EXPECT_EQ(m.at("owned_by"), "turbokv");
  EXPECT_TRUE(model_list_json({}).at("data").is_array());
}

TEST(ApiResponse, SseFraming) {
  const Json body = {{"a", 1}};
  EXPECT_EQ(sse_event(body), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  // A line feed in generated text stays escaped inside the one data line.
  const std::string event = sse_event(Json{{"t", "x\ny"}});
  EXPECT_EQ(event.find('\n'), event.size() - 2);
}

TEST(ApiResponse, BodiesRoundTripAsJson) {
  CompletionChoice choice;
  choice.text = "caf\xc3\xa9 \xe2\x9c\x93";
  const std::string text =
      to_json_text(chat_completion_json(meta(Endpoint::kChatCompletions), choice, {}));
  const Json back = Json::parse(text);
  EXPECT_EQ(back.at("choices")[0].at("message").at("content"), choice.text);
  // Keys in OpenAI's order.
  EXPECT_LT(text.find("\"id\""), text.find("\"object\""));
  EXPECT_LT(text.find("\"choices\""), text.find("\"usage\""));
}

}  // namespace
}  // namespace tkv::server
