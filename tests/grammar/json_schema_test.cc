#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>

#include "grammar_test_util.h"

namespace tkv::grammar {
namespace {

using test::error_of;
using test::gbnf;
using test::schema;

TEST(JsonSchema, Primitives) {
  EXPECT_TRUE(matches(schema(R"({"type":"string"})"), R"("a \"quoted\" \u00e9 é")"));
  EXPECT_FALSE(matches(schema(R"({"type":"string"})"), "\"a\nb\""));  // raw control character
  EXPECT_FALSE(matches(schema(R"({"type":"string"})"), R"("\x")"));
  EXPECT_TRUE(matches(schema(R"({"type":"number"})"), "-12.5e+3"));
  EXPECT_FALSE(matches(schema(R"({"type":"number"})"), "012"));
  EXPECT_TRUE(matches(schema(R"({"type":"integer"})"), "-42"));
  EXPECT_FALSE(matches(schema(R"({"type":"integer"})"), "4.2"));
  EXPECT_TRUE(matches(schema(R"({"type":"boolean"})"), "false"));
  EXPECT_FALSE(matches(schema(R"({"type":"boolean"})"), "null"));
  EXPECT_TRUE(matches(schema(R"({"type":"null"})"), "null"));
  EXPECT_TRUE(matches(schema(R"({"type":["integer","null"]})"), "null"));
  EXPECT_TRUE(matches(schema(R"({"type":["integer","null"]})"), "7"));
  EXPECT_FALSE(matches(schema(R"({"type":["integer","null"]})"), "true"));
  EXPECT_TRUE(matches(schema(R"({"type":"integer","nullable":true})"), "null"));
}

TEST(JsonSchema, AnyValueAndAnyObject) {
  const auto any = schema("{}");
  for (const char* v : {R"({"a":[1,{"b":null}],"c":"d"})", "[]", "1.5", R"("s")", "true"})
    EXPECT_TRUE(matches(any, v)) << v;
  const auto object = gbnf(json_object_gbnf());
  EXPECT_TRUE(matches(object, R"({ "a": [1, 2], "b": {"c": "d"} })"));
  EXPECT_TRUE(matches(object, "{}"));
  EXPECT_FALSE(matches(object, "[]"));
  EXPECT_FALSE(matches(object, R"({"a":})"));
  EXPECT_FALSE(matches(object, R"({"a":1,})"));
}

TEST(JsonSchema, ObjectsFollowPropertiesAndRequired) {
  const auto g = schema(R"({"type":"object","properties":{
      "name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},
      "required":["name"]})");
  EXPECT_TRUE(matches(g, R"({"name":"x"})"));
  EXPECT_TRUE(matches(g, R"({"name":"x","age":3})"));
  EXPECT_TRUE(matches(g, R"({"name":"x","tags":["a","b"]})"));
  EXPECT_TRUE(matches(g, "{\n  \"name\": \"x\",\n  \"age\": 3,\n  \"tags\": []\n}"));
  EXPECT_FALSE(matches(g, R"({"age":3})"));               // name is required
  EXPECT_FALSE(matches(g, R"({"age":3,"name":"x"})"));    // in the listed order
  EXPECT_FALSE(matches(g, R"({"name":"x","other":1})"));  // no other keys
  EXPECT_FALSE(matches(g, R"({"name":"x",})"));
  const auto optional = schema(R"({"properties":{"a":{"type":"integer"},"b":{"type":"integer"}}})");
  EXPECT_TRUE(matches(optional, "{}"));
  EXPECT_TRUE(matches(optional, R"({"b":1})"));
  EXPECT_TRUE(matches(optional, R"({"a":1,"b":2})"));
  EXPECT_FALSE(matches(optional, R"({,"b":1})"));
}

TEST(JsonSchema, AdditionalProperties) {
  const auto any_more = schema(
      R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":true})");
  EXPECT_TRUE(matches(any_more, R"({"a":1,"x":[true]})"));
  EXPECT_TRUE(matches(any_more, R"({"x":"y"})"));
  const auto typed = schema(R"({"type":"object","additionalProperties":{"type":"number"}})");
  EXPECT_TRUE(matches(typed, R"({"x":1,"y":2.5})"));
  EXPECT_FALSE(matches(typed, R"({"x":"1"})"));
  EXPECT_TRUE(matches(schema(R"({"type":"object","additionalProperties":false})"), "{}"));
  EXPECT_FALSE(matches(schema(R"({"type":"object","additionalProperties":false})"), R"({"a":1})"));
}

TEST(JsonSchema, EnumConstAnyOfOneOf) {
  const auto e = schema(R"({"enum":["red","green",3,null]})");
  EXPECT_TRUE(matches(e, R"("green")"));
  EXPECT_TRUE(matches(e, "3"));
  EXPECT_TRUE(matches(e, "null"));
  EXPECT_FALSE(matches(e, R"("blue")"));
  EXPECT_TRUE(matches(schema(R"({"const":{"k":[1]}})"), R"({"k":[1]})"));
  EXPECT_FALSE(matches(schema(R"({"const":"x"})"), R"("y")"));
  for (const char* key : {"anyOf", "oneOf"}) {
    const auto g = schema(std::string(R"({")") + key +
                          R"(":[{"type":"integer"},{"type":"string","maxLength":2}]})");
    EXPECT_TRUE(matches(g, "5"));
    EXPECT_TRUE(matches(g, R"("ab")"));
    EXPECT_FALSE(matches(g, R"("abc")"));
  }
}

TEST(JsonSchema, Arrays) {
  const auto bounded =
      schema(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})");
  EXPECT_TRUE(matches(bounded, "[1]"));
  EXPECT_TRUE(matches(bounded, "[1, 2, 3]"));
  EXPECT_FALSE(matches(bounded, "[]"));
  EXPECT_FALSE(matches(bounded, "[1,2,3,4]"));
  EXPECT_FALSE(matches(bounded, R"(["a"])"));
  EXPECT_TRUE(matches(schema(R"({"type":"array","maxItems":0})"), "[]"));
  EXPECT_TRUE(matches(schema(R"({"type":"array"})"), R"([1,"a",{}])"));
  const auto tuple = schema(
      R"({"type":"array","prefixItems":[{"type":"string"},{"type":"boolean"}],"items":false})");
  EXPECT_TRUE(matches(tuple, R"(["a", true])"));
  EXPECT_FALSE(matches(tuple, R"(["a"])"));
  EXPECT_FALSE(matches(tuple, R"([true, "a"])"));
}

TEST(JsonSchema, StringLengthsFormatsAndPatterns) {
  const auto len = schema(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_TRUE(matches(len, R"("ab")"));
  EXPECT_TRUE(matches(len, R"("a\nb")"));  // an escape is one character
  EXPECT_FALSE(matches(len, R"("a")"));
  EXPECT_FALSE(matches(len, R"("abcd")"));
  EXPECT_TRUE(matches(schema(R"({"type":"string","format":"date"})"), R"("2024-02-29")"));
  EXPECT_FALSE(matches(schema(R"({"type":"string","format":"date"})"), R"("2024-13-01")"));
  EXPECT_TRUE(matches(schema(R"({"type":"string","format":"time"})"), R"("23:59:01Z")"));
  EXPECT_TRUE(matches(schema(R"({"type":"string","format":"date-time"})"),
                      R"("2024-01-02T03:04:05.123+01:00")"));
  EXPECT_TRUE(matches(schema(R"({"type":"string","format":"uuid"})"),
                      R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(matches(schema(R"({"type":"string","format":"uuid"})"), R"("123e4567")"));
  const auto pat = schema(R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3,4}(x|yz)?$"})");
  EXPECT_TRUE(matches(pat, R"("AB-123")"));
  EXPECT_TRUE(matches(pat, R"("AB-1234yz")"));
  EXPECT_FALSE(matches(pat, R"("AB-12")"));
  EXPECT_FALSE(matches(pat, R"("ab-123")"));
  EXPECT_FALSE(matches(pat, R"("AB-123y")"));
  const auto dot = schema(R"({"type":"string","pattern":"^a.c[^0-9]$"})");
  EXPECT_TRUE(matches(dot, R"("abcd")"));
  EXPECT_FALSE(matches(dot, R"("abc1")"));
  EXPECT_FALSE(matches(dot, R"("a"c1")"));
}

TEST(JsonSchema, RefsAndRecursion) {
  const auto g = schema(R"({"$defs":{"node":{"type":"object","properties":{
      "v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["v"]}},"$ref":"#/$defs/node"})");
  EXPECT_TRUE(matches(g, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"));
  EXPECT_FALSE(matches(g, R"({"v":1,"kids":[{"w":2}]})"));
  const auto old = schema(
      R"({"definitions":{"c":{"enum":["x"]}},"type":"array","items":{"$ref":"#/definitions/c"}})");
  EXPECT_TRUE(matches(old, R"(["x","x"])"));
  const auto self = schema(R"({"type":"array","items":{"$ref":"#"},"maxItems":2})");
  EXPECT_TRUE(matches(self, "[[],[[]]]"));
}

TEST(JsonSchema, StrictModeSchemaOfOpenAI) {
  // What the openai client sends for a zod object under strict mode.
  const auto g = schema(R"({"type":"object","properties":{
      "name":{"type":"string"},"date":{"type":"string"},
      "participants":{"type":"array","items":{"type":"string"}}},
      "required":["name","date","participants"],"additionalProperties":false,
      "$schema":"http://json-schema.org/draft-07/schema#"})");
  EXPECT_TRUE(matches(g, R"({"name":"fair","date":"Friday","participants":["Alice","Bob"]})"));
  EXPECT_FALSE(matches(g, R"({"name":"fair","date":"Friday"})"));
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  const struct {
    const char* schema;
    const char* expected;
  } cases[] = {
      {R"({"allOf":[{}]})", "unsupported keyword 'allOf' at #"},
      {R"({"type":"object","properties":{"a":{"not":{}}}})",
       "unsupported keyword 'not' at #/properties/a"},
      {R"({"type":"integer","minimum":3})", "unsupported keyword 'minimum'"},
      {R"({"type":"array","uniqueItems":true})", "unsupported keyword 'uniqueItems'"},
      {R"({"type":"object","patternProperties":{}})", "unsupported keyword 'patternProperties'"},
      {R"({"type":"string","format":"email"})", "format 'email' is not supported"},
      {R"({"type":"string","pattern":"abc"})", "must be anchored"},
      {R"({"type":"string","pattern":"^(?=a)$"})", "lookaround"},
      {R"({"type":"string","pattern":"^\\s$"})", "unsupported escape '\\s'"},
      {R"({"type":"string","pattern":"^\"$"})", "a character JSON escapes"},
      {R"({"type":"string","pattern":"^a{5000}$"})", "repeats more than 1000 times"},
      {R"({"type":"string","pattern":"^a{3,1}$"})", "maximum below its minimum"},
      {R"({"type":"string","pattern":"^a{x}$"})", "bad repetition {x}"},
      {R"({"type":"tuple"})", "unsupported type 'tuple'"},
      {R"({"$ref":"http://example.com/s.json"})",
       "'$ref' 'http://example.com/s.json' is not supported"},
      {R"({"$ref":"#/$defs/missing"})", "is not supported"},
      // Loops of refs that match no text first: their rules would be
      // left-recursive.
      {R"({"$ref":"#"})", "'$ref' '#' comes back to itself before any text"},
      {R"({"anyOf":[{"$ref":"#"},{"type":"string"}]})", "'$ref' '#' comes back to itself"},
      {R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"}]},"b":{"oneOf":[{"type":"null"},)"
       R"({"$ref":"#/$defs/a","nullable":true}]}},"$ref":"#/$defs/a"})",
       "'$ref' '#/$defs/a' comes back to itself"},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "'required' names 'b'"},
      {R"({"type":"array","maxItems":100000})", "'maxItems' over 1000"},
      {R"({"type":"string","minLength":3,"maxLength":2})", "'maxLength' below 'minLength'"},
      {"false", "matches nothing"},
      {"3", "must be an object or a boolean"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.schema);
    const std::string e =
        error_of([&] { json_schema_to_gbnf(nlohmann::ordered_json::parse(c.schema)); });
    EXPECT_EQ(e.rfind("json schema: ", 0), 0u) << e;
    EXPECT_NE(e.find(c.expected), std::string::npos) << e;
  }
}

TEST(JsonSchema, DeepNestingIsRefused) {
  std::string s;
  for (int i = 0; i < 100; ++i) s += R"({"type":"array","items":)";
  s += "{}";
  for (int i = 0; i < 100; ++i) s += "}";
  const std::string e = error_of([&] { json_schema_to_gbnf(nlohmann::ordered_json::parse(s)); });
  EXPECT_NE(e.find("nested deeper than"), std::string::npos) << e;
}

// Two schemas under their own prefixes compose into one grammar: only the
// shared primitives have the same names, and they read the same.
TEST(JsonSchema, PrefixedRuleSetsCompose) {
  const auto a = json_schema_to_gbnf(nlohmann::ordered_json::parse(
                                         R"({"type":"object","properties":{"x":{"type":"integer"}},
                                             "required":["x"]})"),
                                     "a-");
  const auto b = json_schema_to_gbnf(
      nlohmann::ordered_json::parse(R"({"type":"array","items":{"type":"string"}})"), "b-");
  EXPECT_EQ(a.find("root ::="), a.find("a-root ::=") + 2);
  EXPECT_NE(b.find("b-root ::="), std::string::npos);
  std::string merged = "root ::= a-root | b-root\n";
  std::set<std::string> names;
  for (const std::string& text : {a, b}) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      if (names.insert(line.substr(0, line.find(" ::= "))).second) merged += line + "\n";
  }
  const auto g = gbnf(merged);
  EXPECT_TRUE(matches(g, R"({"x": 1})"));
  EXPECT_TRUE(matches(g, R"(["p", "q"])"));
  EXPECT_FALSE(matches(g, R"({"x": "1"})"));
  EXPECT_FALSE(matches(g, R"([1])"));
}

TEST(Gbnf, LiteralEscapes) {
  EXPECT_EQ(gbnf_literal("a\"b\\c\n"), R"("a\"b\\c\x0A")");
  EXPECT_TRUE(matches(gbnf("root ::= " + gbnf_literal("q\"\\\t|")), "q\"\\\t|"));
}

}  // namespace
}  // namespace tkv::grammar
