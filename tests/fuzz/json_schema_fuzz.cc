// The JSON Schema compiler (grammar/json_schema.h): any bytes that parse as
// JSON, as a schema. A rejection is a tkv::Error; an accepted schema's
// GBNF must parse (the compiler only writes valid grammars), and its matcher
// then runs over the input text.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "fuzz_target.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  std::string gbnf;
  try {
    gbnf = tkv::grammar::json_schema_to_gbnf(schema);
  } catch (const tkv::Error&) {
    return 0;
  }
  std::shared_ptr<const tkv::grammar::Grammar> g;
  try {
    g = std::make_shared<const tkv::grammar::Grammar>(tkv::grammar::parse_gbnf(gbnf));
  } catch (const tkv::Error& e) {
    if (std::string(e.what()).find("too large") != std::string::npos) return 0;
    std::fprintf(stderr, "json_schema_fuzz: the compiled grammar does not parse: %s\n%s\n",
                 e.what(), gbnf.c_str());
    std::abort();
  }
  tkv::grammar::Matcher m(g);
  tkv::grammar::Matcher::State s = m.start();
  for (size_t i = 0; i < size && i < 256 && s != tkv::grammar::Matcher::kDead; ++i)
    s = m.step(s, data[i]);
  return 0;
}
