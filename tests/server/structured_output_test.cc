// Structured output (server/structured_output.h): response_format and
// grammar as the request parser reads them, and end to end through the HTTP
// server on a synthesized random-weight model, whose output follows only
// the grammar: under a JSON schema it must parse and validate.
#include "server/structured_output.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <variant>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "model/synth.h"
#include "scheduler_test_util.h"
#include "server/http_server.h"
#include "test_util.h"

namespace tkv::server {
namespace {

using Json = nlohmann::json;

GenerationRequest chat(const std::string& extra) {
  auto r = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}])" + extra + "}");
  if (const ApiError* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << e->message;
  return std::get<GenerationRequest>(r);
}

ApiError chat_error(const std::string& extra) {
  auto r = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}])" + extra + "}");
  if (!std::holds_alternative<ApiError>(r)) ADD_FAILURE() << "accepted: " << extra;
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(StructuredOutputRequest, FormatsBecomeGrammars) {
  EXPECT_EQ(chat("").grammar, nullptr);
  EXPECT_EQ(chat(R"(,"response_format":{"type":"text"})").grammar, nullptr);
  const auto object = chat(R"(,"response_format":{"type":"json_object"})").grammar;
  ASSERT_NE(object, nullptr);
  EXPECT_TRUE(grammar::matches(object, R"({"a": [1]})"));
  EXPECT_FALSE(grammar::matches(object, "[1]"));
  const auto schema = chat(R"(,"response_format":{"type":"json_schema","json_schema":{
      "name":"pair","strict":true,"schema":{"type":"object","properties":{
      "z":{"type":"integer"},"a":{"type":"boolean"}},"required":["z","a"],
      "additionalProperties":false}}})")
                          .grammar;
  ASSERT_NE(schema, nullptr);
  // Properties in the order the request wrote them (z before a).
  EXPECT_TRUE(grammar::matches(schema, R"({"z": 1, "a": true})"));
  EXPECT_FALSE(grammar::matches(schema, R"({"a": true, "z": 1})"));
  // llama-server's forms: the schema in response_format, and GBNF.
  const auto flat =
      chat(R"(,"response_format":{"type":"json_schema","schema":{"enum":[1,2]}})").grammar;
  ASSERT_NE(flat, nullptr);
  EXPECT_TRUE(grammar::matches(flat, "2"));
  const auto gbnf = chat(R"(,"grammar":"root ::= \"yes\" | \"no\"")").grammar;
  ASSERT_NE(gbnf, nullptr);
  EXPECT_TRUE(grammar::matches(gbnf, "no"));
  EXPECT_FALSE(grammar::matches(gbnf, "maybe"));
  // Completions take them too.
  auto c = parse_completion_request(R"({"prompt":"x","response_format":{"type":"json_object"}})");
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(c));
  EXPECT_NE(std::get<GenerationRequest>(c).grammar, nullptr);
}

TEST(StructuredOutputRequest, ProblemsAre400sNamingTheField) {
  const struct {
    const char* extra;
    const char* param;
    const char* in_message;
  } cases[] = {
      {R"(,"grammar":"root ::= \"a")", "grammar", "line 1, column 12: unterminated literal"},
      {R"(,"grammar":"root ::= x")", "grammar", "rule 'x' is used but not defined"},
      {R"(,"grammar":3)", "grammar", "expected a string"},
      {R"(,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"allOf":[]}}})",
       "response_format.json_schema.schema", "unsupported keyword 'allOf'"},
      {R"(,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"string","format":"email"}}})",
       "response_format.json_schema.schema", "format 'email' is not supported"},
      {R"(,"response_format":{"type":"json_schema"})", "response_format.json_schema",
       "Missing required parameter"},
      {R"(,"response_format":{"type":"json_schema","json_schema":{"name":"n","extra":1}})",
       "response_format.json_schema.extra", "Unrecognized"},
      {R"(,"response_format":{"type":"xml"})", "response_format.type", "'xml' is not one of"},
      {R"(,"response_format":"json")", "response_format", "expected an object"},
      {R"(,"response_format":{"type":"json_object"},"grammar":"root ::= \"a\"")", "grammar",
       "not both"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.extra);
    const ApiError e = chat_error(c.extra);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param);
    EXPECT_NE(e.message.find(c.in_message), std::string::npos) << e.message;
  }
}

// ---- end to end ------------------------------------------------------------

constexpr const char* kSchema = R"({"type":"object","properties":{
    "name":{"type":"string","maxLength":12},
    "age":{"type":"integer"},
    "ok":{"type":"boolean"},
    "color":{"enum":["red","green","blue"]},
    "tags":{"type":"array","items":{"type":"string","maxLength":4},"maxItems":3},
    "nick":{"type":["string","null"],"maxLength":6}},
  "required":["name","age","ok","color","tags","nick"],"additionalProperties":false})";

// What kSchema asks, checked on the parsed value.
void expect_valid(const Json& v) {
  ASSERT_TRUE(v.is_object()) << v.dump();
  EXPECT_EQ(v.size(), 6u) << v.dump();
  ASSERT_TRUE(v.contains("name") && v["name"].is_string()) << v.dump();
  // maxLength counts characters; bytes bound them from above.
  EXPECT_LE(v["name"].get<std::string>().size(), 12u * 4);
  EXPECT_TRUE(v["age"].is_number_integer()) << v.dump();
  EXPECT_TRUE(v["ok"].is_boolean()) << v.dump();
  ASSERT_TRUE(v["color"].is_string()) << v.dump();
  const std::string color = v["color"];
  EXPECT_TRUE(color == "red" || color == "green" || color == "blue") << color;
  ASSERT_TRUE(v["tags"].is_array()) << v.dump();
  EXPECT_LE(v["tags"].size(), 3u);
  for (const Json& t : v["tags"]) EXPECT_TRUE(t.is_string()) << v.dump();
  EXPECT_TRUE(v["nick"].is_null() || v["nick"].is_string()) << v.dump();
}

class StructuredOutputServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model::SynthOptions o;
    o.type = "f32";
    o.seed = 3;
    const std::string path = tkv::test::temp_dir() + "/tiny.gguf";
    model::write_synth_model(model::synth_preset("tiny"), o, path);
    m_ = new test::LoadedModel(test::load_model(path));
    SchedulerOptions s;
    s.context = 1024;
    s.parallel = 2;
    s.threads = 1;
    scheduler_ = new Scheduler(*m_->model, *m_->tokenizer, s);
    ServedModel served;
    served.id = "tiny";
    served.tokenizer = m_->tokenizer.get();
    // A synthesized model has no chat template.
    served.chat_template = tok::ChatTemplate::by_name("chatml");
    served.context = s.context;
    HttpOptions h;
    h.port = 0;
    http_ = new HttpServer(served, *scheduler_, *(metrics_ = new ServerMetrics), h);
    port_ = http_->bind();
    thread_ = new std::thread([] { http_->serve(); });
  }
  static void TearDownTestSuite() {
    http_->stop_admitting();
    scheduler_->drain(std::chrono::milliseconds(0));
    http_->wait_idle(std::chrono::seconds(5));
    http_->stop();
    thread_->join();
    delete thread_;
    delete http_;
    delete scheduler_;
    delete metrics_;
    delete m_;
  }
  static Json post(const std::string& route, const Json& body, int expect_status = 200) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    const auto r = c.Post(route, body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return Json();
    EXPECT_EQ(r->status, expect_status) << r->body;
    return Json::parse(r->body, nullptr, false);
  }
  static inline test::LoadedModel* m_ = nullptr;
  static inline Scheduler* scheduler_ = nullptr;
  static inline ServerMetrics* metrics_ = nullptr;
  static inline HttpServer* http_ = nullptr;
  static inline std::thread* thread_ = nullptr;
  static inline int port_ = 0;
};

TEST_F(StructuredOutputServer, JsonSchemaOutputParsesAndValidates) {
  for (int seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(seed);
    const Json body = {
        {"messages", {{{"role", "user"}, {"content", "Describe a person."}}}},
        {"temperature", 1.0},
        {"seed", seed},
        {"max_tokens", 900},  // the schema bounds the output well below this
        {"response_format",
         {{"type", "json_schema"},
          {"json_schema",
           {{"name", "person"}, {"strict", true}, {"schema", Json::parse(kSchema)}}}}}};
    const Json r = post("/v1/chat/completions", body);
    ASSERT_TRUE(r.is_object()) << r.dump();
    const Json& choice = r["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "stop") << r.dump();
    const std::string content = choice["message"]["content"];
    const Json v = Json::parse(content, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << content;
    expect_valid(v);
  }
}

TEST_F(StructuredOutputServer, EachOfNChoicesFollowsTheSchemaOnItsOwn) {
  // The choices are forked from one prefilled prompt; each must advance its
  // own grammar state: choice i is the n: 1 reply with seed + i.
  Json body = {{"messages", {{{"role", "user"}, {"content", "Describe two people."}}}},
               {"temperature", 1.0},
               {"seed", 11},
               {"n", 2},
               {"max_tokens", 900},
               {"response_format",
                {{"type", "json_schema"},
                 {"json_schema", {{"name", "person"}, {"schema", Json::parse(kSchema)}}}}}};
  const Json r = post("/v1/chat/completions", body);
  ASSERT_TRUE(r.is_object()) << r.dump();
  ASSERT_EQ(r["choices"].size(), 2u) << r.dump();
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    const Json& choice = r["choices"][i];
    EXPECT_EQ(choice["index"], i);
    EXPECT_EQ(choice["finish_reason"], "stop") << r.dump();
    const std::string content = choice["message"]["content"];
    const Json v = Json::parse(content, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << content;
    expect_valid(v);
    body["n"] = 1;
    body["seed"] = 11 + i;
    const Json one = post("/v1/chat/completions", body);
    ASSERT_TRUE(one.is_object()) << one.dump();
    EXPECT_EQ(one["choices"][0]["message"]["content"], content);
  }
}

TEST_F(StructuredOutputServer, GrammarFieldOnCompletionsStreamed) {
  const Json body = {{"prompt", "Answer:"},
                     {"temperature", 1.0},
                     {"seed", 9},
                     {"max_tokens", 50},
                     {"grammar", "root ::= (\"yes\" | \"no\") \", \" [0-9]{2} \".\""}};
  const Json r = post("/v1/completions", body);
  ASSERT_TRUE(r.is_object()) << r.dump();
  const std::string text = r["choices"][0]["text"];
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << r.dump();
  EXPECT_TRUE(grammar::matches(std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(
                                   "root ::= (\"yes\" | \"no\") \", \" [0-9]{2} \".\"")),
                               text))
      << text;
}

TEST_F(StructuredOutputServer, JsonObjectIsAValidPrefixOrAnObject) {
  const Json body = {{"messages", {{{"role", "user"}, {"content", "JSON please"}}}},
                     {"temperature", 0.0},
                     {"max_tokens", 60},
                     {"response_format", {{"type", "json_object"}}}};
  const Json r = post("/v1/chat/completions", body);
  ASSERT_TRUE(r.is_object()) << r.dump();
  const std::string content = r["choices"][0]["message"]["content"];
  ASSERT_FALSE(content.empty());
  EXPECT_EQ(content[0], '{') << content;
  if (r["choices"][0]["finish_reason"] == "stop") {
    EXPECT_TRUE(Json::parse(content, nullptr, false).is_object()) << content;
  } else {  // cut by max_tokens: still a prefix the grammar allows
    grammar::Matcher m(
        std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(grammar::json_object_gbnf())));
    EXPECT_NE(m.advance(m.start(), content), grammar::Matcher::kDead) << content;
  }
}

TEST_F(StructuredOutputServer, BadGrammarsAre400s) {
  const Json bad = post("/v1/completions", {{"prompt", "x"}, {"grammar", "root ::= [a-"}}, 400);
  EXPECT_EQ(bad["error"]["param"], "grammar") << bad.dump();
  const Json schema =
      post("/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", "x"}}}},
            {"response_format",
             {{"type", "json_schema"},
              {"json_schema", {{"name", "n"}, {"schema", {{"not", Json::object()}}}}}}}},
           400);
  EXPECT_NE(schema["error"]["message"].get<std::string>().find("'not'"), std::string::npos)
      << schema.dump();
}

}  // namespace
}  // namespace tkv::server
