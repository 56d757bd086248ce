// Helpers of the grammar tests: a grammar from GBNF or a schema, and
// whether it accepts a text.
#pragma once

#include <memory>
#include <string>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace tkv::grammar::test {

inline std::shared_ptr<const Grammar> gbnf(const std::string& text) {
  return std::make_shared<const Grammar>(parse_gbnf(text));
}

inline std::shared_ptr<const Grammar> schema(const std::string& json) {
  return gbnf(json_schema_to_gbnf(nlohmann::ordered_json::parse(json)));
}

// The error a callable throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace tkv::grammar::test
