// Request parsing and validation: every accepted field and its default, and
// every rejection with its status, param and code, as the OpenAI API answers.
#include "server/api_request.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "common/error.h"

namespace tkv::server {
namespace {

using Parsed = std::variant<GenerationRequest, ApiError>;

GenerationRequest ok(const Parsed& r) {
  if (const ApiError* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << "rejected: " << e->message;
    return {};
  }
  return std::get<GenerationRequest>(r);
}

ApiError err(const Parsed& r) {
  if (std::holds_alternative<GenerationRequest>(r)) {
    ADD_FAILURE() << "accepted";
    return {};
  }
  return std::get<ApiError>(r);
}

GenerationRequest chat(const std::string& extra_fields) {
  return ok(
      parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}])" + extra_fields + "}"));
}

ApiError chat_error(const std::string& extra_fields) {
  return err(
      parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}])" + extra_fields + "}"));
}

ApiError completion_error(const std::string& extra_fields) {
  return err(parse_completion_request(R"({"prompt":"x")" + extra_fields + "}"));
}

TEST(ApiRequest, ChatDefaults) {
  const GenerationRequest r =
      ok(parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}]})"));
  EXPECT_EQ(r.endpoint, Endpoint::kChatCompletions);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].role, "user");
  EXPECT_EQ(r.messages[0].content, "hi");
  EXPECT_EQ(r.model, "");
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_EQ(r.temperature, 1.0);
  EXPECT_EQ(r.top_p, 1.0);
  EXPECT_EQ(r.top_k, 0);
  EXPECT_EQ(r.min_p, 0.0);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 0);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
}

TEST(ApiRequest, ChatEveryAcceptedField) {
  const GenerationRequest r = ok(parse_chat_request(R"({
    "model": "tkv-test-23M",
    "messages": [{"role": "developer", "content": "Be terse."},
                 {"role": "user", "content": [{"type": "text", "text": "a"},
                                              {"type": "text", "text": "b"}], "name": "ann"},
                 {"role": "assistant", "content": "ok", "refusal": null},
                 {"role": "user", "content": "go"}],
    "max_tokens": 7, "temperature": 0.25, "top_p": 0.5, "top_k": 40, "min_p": 0.05,
    "seed": -3, "stop": ["\n\n", "END"], "presence_penalty": 0, "frequency_penalty": 0.0,
    "n": 1, "logprobs": true, "top_logprobs": 3, "stream": true,
    "stream_options": {"include_usage": true}, "user": "u1", "metadata": {"k": "v"},
    "store": false, "service_tier": "auto"})"));
  EXPECT_EQ(r.model, "tkv-test-23M");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");  // developer is the system role
  EXPECT_EQ(r.messages[0].content, "Be terse.");
  EXPECT_EQ(r.messages[1].content, "a\nb");  // text parts joined by a line feed
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.temperature, 0.25);
  EXPECT_EQ(r.top_p, 0.5);
  EXPECT_EQ(r.top_k, 40);
  EXPECT_DOUBLE_EQ(r.min_p, 0.05);
  EXPECT_EQ(r.seed, -3);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(ApiRequest, NullIsTheSameAsAbsent) {
  const GenerationRequest r =
      chat(R"(,"temperature":null,"stop":null,"seed":null,"tools":null,"stream_options":null)");
  EXPECT_EQ(r.temperature, 1.0);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.seed.has_value());
}

TEST(ApiRequest, MaxCompletionTokensWinsOverMaxTokens) {
  EXPECT_EQ(chat(R"(,"max_tokens":10,"max_completion_tokens":4)").max_tokens, 4);
  EXPECT_EQ(chat(R"(,"max_completion_tokens":9)").max_tokens, 9);
  EXPECT_EQ(chat(R"(,"max_tokens":3.0)").max_tokens, 3);  // JSON does not tell 3 from 3.0
}

TEST(ApiRequest, AssistantMayHaveNoContentOthersMayNot) {
  const GenerationRequest r = ok(parse_chat_request(
      R"({"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null}]})"));
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "");
  const ApiError e = err(parse_chat_request(R"({"messages":[{"role":"user"}]})"));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages[0].content");
  EXPECT_EQ(e.code, "missing_required_parameter");
}

TEST(ApiRequest, MessagesRejections) {
  struct Case {
    const char* body;
    const char* param;
    const char* code;
    const char* in_message;
  };
  const Case cases[] = {
      {R"({})", "messages", "missing_required_parameter", "'messages'"},
      {R"({"messages":"hi"})", "messages", "invalid_type", "expected an array, but got a string"},
      {R"({"messages":[]})", "messages", "invalid_value", "at least one"},
      {R"({"messages":[3]})", "messages[0]", "invalid_type", "expected an object"},
      {R"({"messages":[{"content":"x"}]})", "messages[0].role", "missing_required_parameter", ""},
      {R"({"messages":[{"role":"tool","content":"x"}]})", "messages[0].tool_call_id",
       "missing_required_parameter", "'messages[0].tool_call_id'"},
      {R"({"messages":[{"role":"function","content":"x"}]})", "messages[0].role",
       "unsupported_value", "'function'"},
      {R"({"messages":[{"role":"wizard","content":"x"}]})", "messages[0].role", "invalid_value",
       "'wizard'"},
      {R"({"messages":[{"role":"user","content":7}]})", "messages[0].content", "invalid_type",
       "got an integer"},
      {R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},
          {"type":"image_url","image_url":{"url":"x"}}]}]})",
       "messages[0].content[1].type", "unsupported_value", "'image_url'"},
      {R"({"messages":[{"role":"user","content":[{"type":"input_audio"}]}]})",
       "messages[0].content[0].type", "unsupported_value", "'input_audio'"},
      {R"({"messages":[{"role":"user","content":[{"text":"a"}]}]})", "messages[0].content[0].type",
       "missing_required_parameter", ""},
      {R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})",
       "messages[0].content[0].text", "missing_required_parameter", ""},
      {R"({"messages":[{"role":"user","content":[{"type":"text","text":"a","x":1}]}]})",
       "messages[0].content[0].x", "unknown_parameter", "Unrecognized request argument"},
      {R"({"messages":[{"role":"assistant","content":"x","tool_calls":[{"id":"1"}]}]})",
       "messages[0].tool_calls[0].function", "missing_required_parameter", "function"},
      {R"({"messages":[{"role":"user","content":"x","mood":"happy"}]})", "messages[0].mood",
       "unknown_parameter", "Unrecognized request argument supplied: messages[0].mood"},
      {R"({"messages":[{"role":"user","content":"x","name":5}]})", "messages[0].name",
       "invalid_type", "expected a string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    const ApiError e = err(parse_chat_request(c.body));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.type, "invalid_request_error");
    EXPECT_EQ(e.param, c.param);
    EXPECT_EQ(e.code, c.code);
    EXPECT_NE(e.message.find(c.in_message), std::string::npos) << e.message;
  }
}

TEST(ApiRequest, WrongTypesNameTheFieldAndTheType) {
  struct Case {
    const char* fields;
    const char* param;
    const char* message;
  };
  const Case cases[] = {
      {R"(,"temperature":"hot")", "temperature",
       "Invalid type for 'temperature': expected a number, but got a string instead."},
      {R"(,"max_tokens":"5")", "max_tokens",
       "Invalid type for 'max_tokens': expected an integer, but got a string instead."},
      {R"(,"max_tokens":2.5)", "max_tokens",
       "Invalid type for 'max_tokens': expected an integer, but got a number instead."},
      {R"(,"top_k":true)", "top_k",
       "Invalid type for 'top_k': expected an integer, but got a boolean instead."},
      {R"(,"stream":1)", "stream",
       "Invalid type for 'stream': expected a boolean, but got an integer instead."},
      {R"(,"model":["m"])", "model",
       "Invalid type for 'model': expected a string, but got an array instead."},
      {R"(,"stop":{"a":1})", "stop",
       "Invalid type for 'stop': expected a string or an array of strings, but got an object "
       "instead."},
      {R"(,"stop":["a",2])", "stop[1]",
       "Invalid type for 'stop[1]': expected a string, but got an integer instead."},
      {R"(,"logprobs":1)", "logprobs",
       "Invalid type for 'logprobs': expected a boolean, but got an integer instead."},
      {R"(,"seed":"7")", "seed",
       "Invalid type for 'seed': expected an integer, but got a string instead."},
      {R"(,"stream":true,"stream_options":true)", "stream_options",
       "Invalid type for 'stream_options': expected an object, but got a boolean instead."},
      {R"(,"metadata":"m")", "metadata",
       "Invalid type for 'metadata': expected an object, but got a string instead."},
      {R"(,"user":1)", "user",
       "Invalid type for 'user': expected a string, but got an integer instead."},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fields);
    const ApiError e = chat_error(c.fields);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param);
    EXPECT_EQ(e.code, "invalid_type");
    EXPECT_EQ(e.message, c.message);
  }
}

TEST(ApiRequest, ValuesOutOfRange) {
  struct Case {
    const char* fields;
    const char* param;
  };
  const Case cases[] = {
      {R"(,"temperature":2.01)", "temperature"},
      {R"(,"temperature":-0.1)", "temperature"},
      {R"(,"top_p":0)", "top_p"},
      {R"(,"top_p":1.5)", "top_p"},
      {R"(,"top_k":-1)", "top_k"},
      {R"(,"min_p":1.1)", "min_p"},
      {R"(,"max_tokens":0)", "max_tokens"},
      {R"(,"max_tokens":2147483648)", "max_tokens"},
      {R"(,"max_completion_tokens":-5)", "max_completion_tokens"},
      {R"(,"seed":9223372036854775808)", "seed"},
      {R"(,"seed":1e300)", "seed"},
      {R"(,"presence_penalty":3)", "presence_penalty"},
      {R"(,"logprobs":true,"top_logprobs":21)", "top_logprobs"},
      {R"(,"logprobs":true,"top_logprobs":-1)", "top_logprobs"},
      {R"(,"stop":"")", "stop"},
      {R"(,"stop":["a",""])", "stop[1]"},
      {R"(,"stop":["a","b","c","d","e"])", "stop"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fields);
    const ApiError e = chat_error(c.fields);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param);
    EXPECT_EQ(e.code, "invalid_value");
    EXPECT_NE(e.message.find(str("'", c.param, "'")), std::string::npos) << e.message;
  }
}

TEST(ApiRequest, RangeEdgesAreAccepted) {
  const GenerationRequest r =
      chat(R"(,"temperature":0,"top_p":1,"min_p":1,"top_k":0,"max_tokens":2147483647,)"
           R"("seed":-9223372036854775808,"stop":["a","b","c","d"])");
  EXPECT_EQ(r.temperature, 0.0);
  EXPECT_EQ(r.max_tokens, 2147483647);
  EXPECT_EQ(r.seed, INT64_MIN);
  EXPECT_EQ(r.stop.size(), 4u);
  EXPECT_EQ(chat(R"(,"temperature":2)").temperature, 2.0);
  EXPECT_EQ(chat(R"(,"seed":9223372036854775807)").seed, INT64_MAX);
  EXPECT_EQ(chat(R"(,"stop":"###")").stop, std::vector<std::string>{"###"});
}

TEST(ApiRequest, PenaltiesAndBias) {
  GenerationRequest r = chat(R"(,"presence_penalty":0.5,"frequency_penalty":-1.5,)"
                             R"("repeat_penalty":1.1,"repeat_last_n":32,)"
                             R"("logit_bias":{"50256":-100,"7":2.5,"12":100})");
  EXPECT_EQ(r.presence_penalty, 0.5);
  EXPECT_EQ(r.frequency_penalty, -1.5);
  EXPECT_EQ(r.repeat_penalty, 1.1);
  EXPECT_EQ(r.repeat_last_n, 32);
  const std::vector<std::pair<int32_t, float>> bias = {{7, 2.5f}, {12, 100.0f}, {50256, -100.0f}};
  EXPECT_EQ(r.logit_bias, bias);
  const sample::SamplerConfig c = sampler_config(r, 1);
  EXPECT_FLOAT_EQ(c.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(c.frequency_penalty, -1.5f);
  EXPECT_FLOAT_EQ(c.repeat_penalty, 1.1f);
  EXPECT_EQ(c.repeat_last_n, 32);
  EXPECT_EQ(c.logit_bias, bias);
  EXPECT_NO_THROW(sample::validate(c));
  // The same fields on completions.
  r = ok(parse_completion_request(R"({"prompt":"x","presence_penalty":2,"logit_bias":{"0":1}})"));
  EXPECT_EQ(r.presence_penalty, 2.0);
  EXPECT_EQ(r.logit_bias.size(), 1u);
  // Out of range or malformed: 400 naming the field.
  struct Case {
    const char* field;
    const char* param;
    const char* code;
  };
  const Case cases[] = {
      {R"("presence_penalty":2.5)", "presence_penalty", "invalid_value"},
      {R"("frequency_penalty":-3)", "frequency_penalty", "invalid_value"},
      {R"("frequency_penalty":"1")", "frequency_penalty", "invalid_type"},
      {R"("repeat_penalty":0)", "repeat_penalty", "invalid_value"},
      {R"("repeat_last_n":-2)", "repeat_last_n", "invalid_value"},
      {R"("logit_bias":[1])", "logit_bias", "invalid_type"},
      {R"("logit_bias":{"x":1})", "logit_bias", "invalid_value"},
      {R"("logit_bias":{"-1":1})", "logit_bias", "invalid_value"},
      {R"("logit_bias":{"5":101})", "logit_bias.5", "invalid_value"},
      {R"("logit_bias":{"5":"1"})", "logit_bias.5", "invalid_type"},
      {R"("logit_bias":{"5":1,"05":2})", "logit_bias", "invalid_value"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.field);
    const ApiError e = chat_error(std::string(",") + k.field);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, k.param);
    EXPECT_EQ(e.code, k.code);
  }
}

TEST(ApiRequest, CachePromptAndReasoningEffort) {
  EXPECT_TRUE(chat("").cache_prompt);
  EXPECT_FALSE(chat(R"(,"cache_prompt":false)").cache_prompt);
  EXPECT_EQ(chat_error(R"(,"cache_prompt":1)").code, "invalid_type");
  EXPECT_FALSE(ok(parse_completion_request(R"({"prompt":"x","cache_prompt":false})")).cache_prompt);
  EXPECT_EQ(chat(R"(,"reasoning_effort":"low")").reasoning_effort, "low");
  EXPECT_EQ(chat("").reasoning_effort, "");
  EXPECT_EQ(chat_error(R"(,"reasoning_effort":"extreme")").param, "reasoning_effort");
  EXPECT_EQ(chat_error(R"(,"reasoning_effort":1)").code, "invalid_type");
  // A chat field only.
  EXPECT_EQ(completion_error(R"(,"reasoning_effort":"low")").code, "unknown_parameter");
}

TEST(ApiRequest, ChoicesPerRequest) {
  EXPECT_EQ(chat(R"(,"n":1)").n, 1);
  EXPECT_EQ(chat(R"(,"n":4)").n, 4);
  EXPECT_EQ(chat(R"(,"n":128)").n, 128);
  for (const char* n : {"0", "-1", "129", "1.5", R"("2")"}) {
    SCOPED_TRACE(n);
    const ApiError e = chat_error(std::string(R"(,"n":)") + n);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "n");
  }
  EXPECT_EQ(ok(parse_completion_request(R"({"prompt":["a","b"],"n":64})")).n, 64);
  // n x prompts is bounded like n.
  const ApiError e = err(parse_completion_request(R"({"prompt":["a","b","c"],"n":64})"));
  EXPECT_EQ(e.param, "n");
  EXPECT_NE(e.message.find("at most 128"), std::string::npos) << e.message;
}

TEST(ApiRequest, ChatTopLogprobsNeedsLogprobs) {
  const ApiError e = chat_error(R"(,"top_logprobs":2)");
  EXPECT_EQ(e.param, "top_logprobs");
  EXPECT_NE(e.message.find("'logprobs' must be true"), std::string::npos) << e.message;
  const GenerationRequest r = chat(R"(,"logprobs":true,"top_logprobs":20)");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 20);
  EXPECT_TRUE(chat(R"(,"logprobs":true)").logprobs);
  EXPECT_FALSE(chat(R"(,"logprobs":false)").logprobs);
}

TEST(ApiRequest, StreamOptionsNeedStream) {
  const ApiError e = chat_error(R"(,"stream_options":{"include_usage":true})");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "stream_options");
  EXPECT_NE(e.message.find("'stream' is true"), std::string::npos) << e.message;
  EXPECT_FALSE(chat(R"(,"stream":true,"stream_options":{"include_usage":false})").include_usage);
  EXPECT_FALSE(chat(R"(,"stream":true)").include_usage);
  EXPECT_EQ(chat_error(R"(,"stream":true,"stream_options":{"foo":1})").param, "stream_options.foo");
  EXPECT_EQ(chat_error(R"(,"stream":true,"stream_options":{"include_usage":"yes"})").param,
            "stream_options.include_usage");
}

TEST(ApiRequest, UnimplementedFieldsAreNamed) {
  const char* chat_fields[] = {
      R"("functions":[{"name":"f"}])",
      R"("function_call":"auto")",
      R"("audio":{"voice":"alloy","format":"wav"})",
      R"("modalities":["text","audio"])",
      R"("prediction":{"type":"content","content":"x"})",
      R"("web_search_options":{})",
  };
  for (const char* f : chat_fields) {
    SCOPED_TRACE(f);
    const std::string field = f;
    const std::string name = field.substr(1, field.find('"', 1) - 1);
    const ApiError e = chat_error("," + field);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, name);
    EXPECT_EQ(e.code, "unsupported_parameter");
    EXPECT_NE(e.message.find("'" + name + "' is not supported"), std::string::npos) << e.message;
  }
  for (const char* f : {R"("suffix":"end")", R"("echo":true)", R"("best_of":2)"}) {
    SCOPED_TRACE(f);
    const std::string field = f;
    const std::string name = field.substr(1, field.find('"', 1) - 1);
    const ApiError e = completion_error("," + field);
    EXPECT_EQ(e.param, name);
    EXPECT_EQ(e.code, "unsupported_parameter");
  }
}

TEST(ApiRequest, OffValuesOfUnimplementedFieldsAreAccepted) {
  chat(R"(,"tools":[],"tool_choice":"none","functions":[],"function_call":"none",)"
       R"("logit_bias":{},"response_format":{"type":"text"},"modalities":["text"])");
  ok(parse_completion_request(
      R"({"prompt":"x","echo":false,"best_of":1,"suffix":"","logit_bias":{}})"));
}

TEST(ApiRequest, UnknownFieldsAsOpenAI) {
  const ApiError e = chat_error(R"(,"frobnicate":1)");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.message, "Unrecognized request argument supplied: frobnicate");
  EXPECT_EQ(e.param, "frobnicate");
  // Each endpoint's own fields are unknown to the other.
  EXPECT_EQ(chat_error(R"(,"prompt":"x")").message,
            "Unrecognized request argument supplied: prompt");
  EXPECT_EQ(completion_error(R"(,"messages":[])").message,
            "Unrecognized request argument supplied: messages");
  EXPECT_EQ(completion_error(R"(,"tools":[])").message,
            "Unrecognized request argument supplied: tools");
}

// A name or value the client sent may hold any character: quoted in a
// message, its control characters and invalid UTF-8 become escapes, so every
// message stays one printable line; param keeps the name as sent.
TEST(ApiRequest, MessagesQuotingTheClientAreOneLine) {
  const ApiError e = chat_error(R"(,"max_tok\nens":1)");
  EXPECT_EQ(e.message, "Unrecognized request argument supplied: max_tok\\nens");
  EXPECT_EQ(e.param, "max_tok\nens");
  const ApiError role =
      err(parse_chat_request(R"({"messages":[{"role":"us\u0000er\r","content":"x"}]})"));
  EXPECT_EQ(role.param, "messages[0].role");
  EXPECT_EQ(role.message.find_first_of(std::string("\n\r\0", 3)), std::string::npos)
      << role.message;
  EXPECT_NE(role.message.find("us\\x00er\\r"), std::string::npos) << role.message;
}

// What an error quotes of the client is cut: a megabyte-long key gives a
// short answer naming its start, cut at a character boundary.
TEST(ApiRequest, ErrorsQuoteAtMostAShortPrefixOfTheClientsNames) {
  const std::string key = "\u00e9" + std::string(1 << 20, 'k');
  const ApiError e = chat_error(",\"" + key + "\":1");
  EXPECT_LT(e.message.size(), 200u) << e.message.size();
  EXPECT_LT(e.param.size(), 100u);
  EXPECT_EQ(e.param.rfind("\xc3\xa9kkk", 0), 0u) << e.param.substr(0, 10);
  EXPECT_EQ(e.param.substr(e.param.size() - 3), "...");
  const ApiError role = err(parse_chat_request(R"({"messages":[{"role":")" +
                                               std::string(100000, 'r') + R"(","content":"x"}]})"));
  EXPECT_EQ(role.param, "messages[0].role");
  EXPECT_LT(role.message.size(), 300u);
}

TEST(ApiRequest, MalformedBodies) {
  const char* bodies[] = {"",
                          "   \n",
                          "{",
                          "{\"messages\":",
                          "[1,2]",
                          "null",
                          "\"text\"",
                          "42",
                          "{\"a\":1,}",
                          "{'a':1}",
                          "{\"a\":\"\xff\xfe\"}",
                          "{} trailing",
                          "{\"temperature\":1e999}"};
  for (const char* b : bodies) {
    SCOPED_TRACE(b);
    for (const Parsed& p : {parse_chat_request(b), parse_completion_request(b)}) {
      const ApiError e = err(p);
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.type, "invalid_request_error");
      EXPECT_EQ(e.code, "invalid_json");
      EXPECT_EQ(e.param, "");
      EXPECT_FALSE(e.message.empty());
      EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
    }
  }
  EXPECT_NE(err(parse_chat_request("{")).message.find("line 1, column 2"), std::string::npos);
  EXPECT_NE(err(parse_chat_request("[1]")).message.find("got an array"), std::string::npos);
}

TEST(ApiRequest, DeepNestingIsRefusedOthersAccepted) {
  std::string deep = R"({"messages":[{"role":"user","content":"x"}],"metadata":)";
  std::string shallow = deep;
  for (int i = 0; i < 1000; ++i) deep += "{\"a\":";
  deep += "1";
  for (int i = 0; i < 1000; ++i) deep += "}";
  deep += "}";
  const ApiError e = err(parse_chat_request(deep));
  EXPECT_EQ(e.code, "invalid_json");
  EXPECT_NE(e.message.find("nested deeper"), std::string::npos) << e.message;
  for (int i = 0; i < 30; ++i) shallow += "{\"a\":";
  shallow += "1";
  for (int i = 0; i < 30; ++i) shallow += "}";
  shallow += "}";
  ok(parse_chat_request(shallow));
}

TEST(ApiRequest, CompletionPromptForms) {
  GenerationRequest r = ok(parse_completion_request(R"({"prompt":"Once upon"})"));
  EXPECT_EQ(r.endpoint, Endpoint::kCompletions);
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "Once upon");
  EXPECT_FALSE(r.prompts[0].is_tokens);
  EXPECT_TRUE(r.messages.empty());
  r = ok(parse_completion_request(R"({"prompt":["Once"]})"));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "Once");
  r = ok(parse_completion_request(R"({"prompt":[1,2,3]})"));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_TRUE(r.prompts[0].is_tokens);
  EXPECT_EQ(r.prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  r = ok(parse_completion_request(R"({"prompt":[[5,6]]})"));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_TRUE(r.prompts[0].is_tokens);
  EXPECT_EQ(r.prompts[0].tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(ok(parse_completion_request(R"({"prompt":""})")).prompts[0].text, "");
  // Several prompts, strings and token arrays mixed: one job each.
  r = ok(parse_completion_request(R"({"prompt":["a",[7,8],"b"]})"));
  ASSERT_EQ(r.prompts.size(), 3u);
  EXPECT_EQ(r.prompts[0].text, "a");
  EXPECT_EQ(r.prompts[1].tokens, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(r.prompts[2].text, "b");

  struct Case {
    const char* body;
    const char* param;
    const char* code;
  };
  const Case cases[] = {
      {R"({})", "prompt", "missing_required_parameter"},
      {R"({"prompt":null})", "prompt", "missing_required_parameter"},
      {R"({"prompt":5})", "prompt", "invalid_type"},
      {R"({"prompt":[]})", "prompt", "invalid_value"},
      {R"({"prompt":["a",5]})", "prompt[1]", "invalid_type"},
      {R"({"prompt":[[1],[]]})", "prompt[1]", "invalid_value"},
      {R"({"prompt":[-1]})", "prompt[0]", "invalid_value"},
      {R"({"prompt":[1,"a"]})", "prompt[1]", "invalid_type"},
      {R"({"prompt":[1.5]})", "prompt[0]", "invalid_type"},
      {R"({"prompt":[[]]})", "prompt[0]", "invalid_value"},
      {R"({"prompt":[true]})", "prompt[0]", "invalid_type"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    const ApiError e = err(parse_completion_request(c.body));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param);
    EXPECT_EQ(e.code, c.code);
  }
}

TEST(ApiRequest, CompletionFields) {
  const GenerationRequest r = ok(parse_completion_request(
      R"({"model":"m","prompt":"p","max_tokens":16,"temperature":0,"logprobs":3,"stream":true,)"
      R"("stream_options":{"include_usage":true},"stop":"\n","seed":42,"top_k":1,"user":"x"})"));
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_EQ(r.temperature, 0.0);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.seed, 42);
  EXPECT_EQ(r.top_k, 1);
  // logprobs is an integer 0..5 on this endpoint.
  const GenerationRequest zero = ok(parse_completion_request(R"({"prompt":"p","logprobs":0})"));
  EXPECT_TRUE(zero.logprobs);
  EXPECT_EQ(zero.top_logprobs, 0);
  EXPECT_EQ(completion_error(R"(,"logprobs":6)").code, "invalid_value");
  EXPECT_EQ(completion_error(R"(,"logprobs":true)").code, "invalid_type");
  EXPECT_EQ(completion_error(R"(,"top_logprobs":2)").param, "top_logprobs");  // chat only
  EXPECT_EQ(completion_error(R"(,"max_completion_tokens":2)").param, "max_completion_tokens");
}

TEST(ApiRequest, SamplerConfigFromRequest) {
  GenerationRequest r = chat(R"(,"temperature":0.5,"top_p":0.9,"top_k":20,"min_p":0.1,"seed":7)");
  sample::SamplerConfig c = sampler_config(r, 99);
  EXPECT_FLOAT_EQ(c.temperature, 0.5f);
  EXPECT_FLOAT_EQ(c.top_p, 0.9f);
  EXPECT_EQ(c.top_k, 20);
  EXPECT_FLOAT_EQ(c.min_p, 0.1f);
  EXPECT_EQ(c.repeat_penalty, 1.0f);
  EXPECT_EQ(c.seed, 7u);
  EXPECT_NO_THROW(sample::validate(c));
  // No seed in the request: the caller's.
  c = sampler_config(chat(""), 99);
  EXPECT_EQ(c.seed, 99u);
  EXPECT_FLOAT_EQ(c.temperature, 1.0f);  // OpenAI's defaults, not the CLI's
  EXPECT_EQ(c.top_k, 0);
  EXPECT_EQ(c.min_p, 0.0f);
  EXPECT_NO_THROW(sample::validate(c));
  EXPECT_EQ(sampler_config(chat(R"(,"seed":-1)"), 0).seed, UINT64_MAX);
  // A top_p that underflows a float still passes the sampler's (0, 1] check.
  EXPECT_NO_THROW(sample::validate(sampler_config(chat(R"(,"top_p":1e-300)"), 0)));
}

TEST(ApiRequest, ErrorTypesFollowTheStatus) {
  EXPECT_EQ(make_api_error(400, "m").type, "invalid_request_error");
  EXPECT_EQ(make_api_error(401, "m").type, "authentication_error");
  EXPECT_EQ(make_api_error(403, "m").type, "permission_error");
  EXPECT_EQ(make_api_error(404, "m").type, "not_found_error");
  EXPECT_EQ(make_api_error(413, "m").type, "invalid_request_error");
  EXPECT_EQ(make_api_error(429, "m").type, "rate_limit_error");
  EXPECT_EQ(make_api_error(500, "m").type, "server_error");
  EXPECT_EQ(make_api_error(503, "m").type, "server_error");
  const ApiError e = make_api_error(404, "no such model", "model", "model_not_found");
  EXPECT_EQ(e.status, 404);
  EXPECT_EQ(e.message, "no such model");
  EXPECT_EQ(e.param, "model");
  EXPECT_EQ(e.code, "model_not_found");
}

}  // namespace
}  // namespace tkv::server
