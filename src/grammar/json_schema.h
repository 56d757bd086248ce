// JSON Schema -> GBNF (gbnf.h), for structured output: the subset that
// llama.cpp's json-schema-to-grammar and OpenAI's strict mode cover.
//
// Supported: type (object, array, string, number, integer, boolean, null,
// or a list of them), properties / required / additionalProperties (absent
// or false: no other keys; true or a schema: more keys after the listed
// ones), enum, const, anyOf, oneOf, items, prefixItems, minItems, maxItems,
// minLength, maxLength, pattern (anchored ^...$; literals, classes, groups,
// |, quantifiers, \d \w, no characters JSON would escape), format (date,
// time, date-time, uuid), $ref to #/$defs/..., #/definitions/... or #,
// nullable: true, and an empty schema (any JSON value). Properties are
// generated in the order the schema lists them; whitespace between tokens
// is limited (at most two newlines and 20 spaces or tabs).
// Annotations (title, description, default, examples, $schema, $id,
// $comment, deprecated, readOnly, writeOnly, strict) are ignored. Any other
// keyword is refused by name.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tkv::grammar {

// The grammar of JSON values valid under `schema` (an ordered_json, so
// properties keep the order they were written in). Throws tkv::Error
// "json schema: <problem> at <path>" naming an unsupported keyword or value.
// `prefix` (letters, digits, '-') names the start rule prefix + "root" and
// starts every rule the schema adds; the shared primitives (space, string,
// number, value, ...) keep their names and are written the same way by
// every call, so the rule sets of several schemas, each under its own
// prefix, compose into one grammar once each primitive is kept once.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema,
                                const std::string& prefix = "");

// The grammar of any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();

// A regular expression (the `pattern` subset above) as a GBNF expression
// matching the characters of a JSON string without its quotes. Throws
// tkv::Error "json schema: pattern ..." for anything outside the subset.
std::string pattern_to_gbnf(const std::string& pattern);

}  // namespace tkv::grammar
