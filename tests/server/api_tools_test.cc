// The tool fields of a chat request (api_tools.h): tools, tool_choice,
// parallel_tool_calls and the tool turns of a conversation, accepted as the
// OpenAI API sends them and refused with the field named.
#include "server/api_tools.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

namespace tkv::server {
namespace {

const char* kWeather =
    R"({"type":"function","function":{"name":"get_weather","description":"Weather in a city",)"
    R"("parameters":{"type":"object","properties":{"unit":{"type":"string"},)"
    R"("city":{"type":"string"}},"required":["city"]},"strict":true}})";

std::variant<GenerationRequest, ApiError> chat(
    const std::string& fields,
    const std::string& messages = R"([{"role":"user","content":"hi"}])") {
  return parse_chat_request(R"({"messages":)" + messages + fields + "}");
}

GenerationRequest ok(const std::variant<GenerationRequest, ApiError>& r) {
  if (const ApiError* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << "rejected: " << e->message;
    return {};
  }
  return std::get<GenerationRequest>(r);
}

ApiError err(const std::variant<GenerationRequest, ApiError>& r) {
  if (std::holds_alternative<GenerationRequest>(r)) {
    ADD_FAILURE() << "accepted";
    return {};
  }
  return std::get<ApiError>(r);
}

TEST(ApiTools, ToolsKeepTheirOrderAndChoiceDefaultsToAuto) {
  const GenerationRequest r = ok(chat(std::string(R"(,"tools":[)") + kWeather + "]"));
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
  EXPECT_TRUE(r.parallel_tool_calls);
  // The schema's properties as sent (unit before city), not sorted.
  EXPECT_EQ(r.tools[0]["function"]["parameters"]["properties"].dump(),
            R"({"unit":{"type":"string"},"city":{"type":"string"}})");
}

TEST(ApiTools, ToolChoiceForms) {
  const std::string tools = std::string(R"(,"tools":[)") + kWeather + "]";
  EXPECT_EQ(ok(chat(tools + R"(,"tool_choice":"none")")).tool_choice, ToolChoice::kNone);
  EXPECT_EQ(ok(chat(tools + R"(,"tool_choice":"required")")).tool_choice, ToolChoice::kRequired);
  const GenerationRequest named =
      ok(chat(tools + R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}})"));
  EXPECT_EQ(named.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(named.tool_choice_name, "get_weather");
  EXPECT_FALSE(ok(chat(tools + R"(,"parallel_tool_calls":false)")).parallel_tool_calls);
  // "none" needs no tools; "required" does.
  EXPECT_EQ(ok(chat(R"(,"tool_choice":"none")")).tool_choice, ToolChoice::kNone);
  EXPECT_EQ(err(chat(R"(,"tool_choice":"required")")).param, "tool_choice");
}

TEST(ApiTools, BadToolsNameTheField) {
  struct Case {
    std::string fields;
    const char* param;
  };
  const std::string weather = std::string(R"(,"tools":[)") + kWeather + "]";
  const Case cases[] = {
      {R"(,"tools":{})", "tools"},
      {R"(,"tools":[3])", "tools[0]"},
      {R"(,"tools":[{"type":"function"}])", "tools[0].function"},
      {R"(,"tools":[{"type":"code_interpreter","function":{"name":"f"}}])", "tools[0].type"},
      {R"(,"tools":[{"type":"function","function":{}}])", "tools[0].function.name"},
      {R"(,"tools":[{"type":"function","function":{"name":"a b"}}])", "tools[0].function.name"},
      {R"(,"tools":[{"type":"function","function":{"name":"f","parameters":[]}}])",
       "tools[0].function.parameters"},
      {R"(,"tools":[{"type":"function","function":{"name":"f","colour":1}}])",
       "tools[0].function.colour"},
      {R"(,"tools":[{"type":"function","function":{"name":"f"}},)"
       R"({"type":"function","function":{"name":"f"}}])",
       "tools[1].function.name"},
      {weather + R"(,"tool_choice":"sometimes")", "tool_choice"},
      {weather + R"(,"tool_choice":{"type":"function","function":{"name":"nope"}})",
       "tool_choice.function.name"},
      {weather + R"(,"tool_choice":7)", "tool_choice"},
      {weather + R"(,"parallel_tool_calls":"yes")", "parallel_tool_calls"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fields);
    const ApiError e = err(chat(c.fields));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param) << e.message;
  }
}

TEST(ApiTools, ToolTurnsReachTheTemplate) {
  const GenerationRequest r = ok(chat(
      "", R"([{"role":"user","content":"Weather in Paris?"},)"
          R"({"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",)"
          R"("function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},)"
          R"({"role":"tool","tool_call_id":"call_1","content":"18 C"},)"
          R"({"role":"assistant","content":"Mild.","reasoning_content":"It is 18 C."}])"));
  ASSERT_EQ(r.messages.size(), 4u);
  const auto& calls = r.messages[1].fields["tool_calls"];
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["id"], "call_1");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(calls[0]["function"]["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].content, "18 C");
  EXPECT_EQ(r.messages[2].fields["tool_call_id"], "call_1");
  EXPECT_EQ(r.messages[3].fields["reasoning_content"], "It is 18 C.");
}

TEST(ApiTools, BadToolTurnsNameTheField) {
  struct Case {
    const char* messages;
    const char* param;
  };
  const Case cases[] = {
      {R"([{"role":"tool","content":"x"}])", "messages[0].tool_call_id"},
      {R"([{"role":"tool","content":"x","tool_call_id":5}])", "messages[0].tool_call_id"},
      {R"([{"role":"user","content":"x","tool_calls":[{"id":"a"}]}])", "messages[0].tool_calls"},
      {R"([{"role":"user","content":"x","tool_call_id":"a"}])", "messages[0].tool_call_id"},
      {R"([{"role":"assistant","tool_calls":{}}])", "messages[0].tool_calls"},
      {R"([{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f",)"
       R"("arguments":"{}"}}]}])",
       "messages[0].tool_calls[0].id"},
      {R"([{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f",)"
       R"("arguments":{}}}]}])",
       "messages[0].tool_calls[0].function.arguments"},
      {R"([{"role":"assistant","tool_calls":[{"id":"a","function":{"arguments":"{}"}}]}])",
       "messages[0].tool_calls[0].function.name"},
      {R"([{"role":"function","content":"x","name":"f"}])", "messages[0].role"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.messages);
    const ApiError e = err(chat("", c.messages));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param) << e.message;
  }
}

}  // namespace
}  // namespace tkv::server
