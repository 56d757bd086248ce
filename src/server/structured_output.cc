#include "server/structured_output.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/error.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "server/api_json.h"

namespace tkv::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using GrammarPtr = std::shared_ptr<const grammar::Grammar>;

using api_json::field;

[[noreturn]] void reject(const std::string& param, const std::string& message,
                         const std::string& code = "invalid_value") {
  api_json::reject(message, param, code);
}

GrammarPtr compile(const std::string& gbnf) {
  return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf));
}

GrammarPtr json_object_grammar() {
  static const GrammarPtr g = compile(grammar::json_object_gbnf());
  return g;
}

// The schema at `path` in the body, reread in its written order.
GrammarPtr schema_grammar(std::string_view raw, const std::vector<std::string>& path,
                          const std::string& param, const std::string& name) {
  ordered_json doc = ordered_json::parse(raw.begin(), raw.end());
  const ordered_json* schema = &doc;
  for (const std::string& key : path) schema = &(*schema)[key];
  try {
    return compile(grammar::json_schema_to_gbnf(*schema));
  } catch (const Error& e) {
    reject(param, "Invalid schema" + (name.empty() ? std::string() : " for '" + name + "'") +
                      " in '" + param + "': " + e.what());
  }
}

GrammarPtr json_schema_format(const json& format, std::string_view raw) {
  const std::string base = "response_format.json_schema";
  // llama-server's form: the schema right in response_format.
  if (const json* schema = field(format, "schema"); schema && !field(format, "json_schema")) {
    if (!schema->is_object() && !schema->is_boolean())
      reject("response_format.schema",
             "Invalid type for 'response_format.schema': expected an object.", "invalid_type");
    return schema_grammar(raw, {"response_format", "schema"}, "response_format.schema", "");
  }
  const json* spec = field(format, "json_schema");
  if (!spec)
    reject(base, "Missing required parameter: '" + base + "'.", "missing_required_parameter");
  if (!spec->is_object())
    reject(base, "Invalid type for '" + base + "': expected an object.", "invalid_type");
  std::string name;
  for (const auto& [key, value] : spec->items()) {
    const std::string param = base + "." + key;
    if (key == "name") {
      if (!value.is_string())
        reject(param, "Invalid type for '" + param + "': expected a string.", "invalid_type");
      name = value.get<std::string>().substr(0, 64);
    } else if (key == "strict") {
      if (!value.is_null() && !value.is_boolean())
        reject(param, "Invalid type for '" + param + "': expected a boolean.", "invalid_type");
    } else if (key == "description") {
      if (!value.is_null() && !value.is_string())
        reject(param, "Invalid type for '" + param + "': expected a string.", "invalid_type");
    } else if (key != "schema") {
      reject(param, "Unrecognized request argument supplied: " + param, "unknown_parameter");
    }
  }
  const json* schema = field(*spec, "schema");
  if (!schema) {  // no schema: any JSON value
    static const GrammarPtr any = compile(grammar::json_schema_to_gbnf(ordered_json::object()));
    return any;
  }
  if (!schema->is_object() && !schema->is_boolean())
    reject(base + ".schema", "Invalid type for '" + base + ".schema': expected an object.",
           "invalid_type");
  return schema_grammar(raw, {"response_format", "json_schema", "schema"}, base + ".schema", name);
}

GrammarPtr response_format(const json& format, std::string_view raw) {
  if (!format.is_object())
    reject("response_format", "Invalid type for 'response_format': expected an object.",
           "invalid_type");
  const json* type = field(format, "type");
  if (!type)
    reject("response_format.type", "Missing required parameter: 'response_format.type'.",
           "missing_required_parameter");
  if (!type->is_string())
    reject("response_format.type", "Invalid type for 'response_format.type': expected a string.",
           "invalid_type");
  const std::string t = type->get<std::string>();
  for (const auto& [key, value] : format.items())
    if (key != "type" && key != "json_schema" && key != "schema")
      reject("response_format." + key,
             "Unrecognized request argument supplied: response_format." + key, "unknown_parameter");
  if (t == "text") return nullptr;
  if (t == "json_object") return json_object_grammar();
  if (t == "json_schema") return json_schema_format(format, raw);
  reject("response_format.type", "Invalid value for 'response_format.type': '" + t.substr(0, 64) +
                                     "' is not one of 'text', 'json_object', 'json_schema'.");
}

}  // namespace

std::variant<GrammarPtr, ApiError> output_grammar(const json& body, std::string_view raw) {
  try {
    GrammarPtr from_format;
    if (const json* f = field(body, "response_format")) from_format = response_format(*f, raw);
    const json* g = field(body, "grammar");
    if (!g) return from_format;
    if (!g->is_string())
      reject("grammar", "Invalid type for 'grammar': expected a string.", "invalid_type");
    if (g->get_ref<const std::string&>().empty()) return from_format;
    if (from_format)
      reject("grammar",
             "Invalid value for 'grammar': send either 'grammar' or a JSON "
             "'response_format', not both.");
    try {
      return compile(g->get<std::string>());
    } catch (const Error& e) {
      reject("grammar", std::string("Invalid value for 'grammar': ") + e.what());
    }
  } catch (const api_json::RequestError& r) {
    return r.error;
  }
}

std::shared_ptr<const grammar::TokenTrie> TokenTrieCache::get(const tok::Tokenizer& tokenizer,
                                                              bool spell_control) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<const grammar::TokenTrie>& trie = spell_control ? spelled_trie_ : trie_;
  if (!trie) {
    std::vector<std::string> bytes(size_t(tokenizer.n_vocab()));
    // Control tokens spell nothing (token_to_piece gives ""): a grammar
    // never allows them; the end tokens are the constraint's. Spelled, they
    // are the markers of a reply syntax read with special tokens (harmony's
    // <|channel|>): the grammar's marker text takes the model's own token.
    for (int32_t t = 0; t < tokenizer.n_vocab(); ++t)
      bytes[size_t(t)] = tokenizer.token_to_piece(t, spell_control);
    if (spell_control)
      for (int32_t t : tokenizer.eog_ids()) bytes[size_t(t)].clear();
    trie = std::make_shared<const grammar::TokenTrie>(std::move(bytes));
  }
  return trie;
}

std::shared_ptr<grammar::GrammarConstraint> output_constraint(
    std::shared_ptr<const grammar::Grammar> grammar, std::shared_ptr<const grammar::TokenTrie> trie,
    const tok::Tokenizer& tokenizer, const std::vector<int32_t>& stop_tokens) {
  std::vector<int32_t> ends = tokenizer.eog_ids();
  for (int32_t t : stop_tokens)
    if (std::find(ends.begin(), ends.end(), t) == ends.end()) ends.push_back(t);
  return std::make_shared<grammar::GrammarConstraint>(std::move(grammar), std::move(trie),
                                                      std::move(ends));
}

}  // namespace tkv::server
