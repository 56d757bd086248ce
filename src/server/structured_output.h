// Structured output: the grammar a request asks its output to follow, from
//   response_format {"type": "json_object"}                    any JSON object
//   response_format {"type": "json_schema", "json_schema":
//                    {"name", "schema", "strict", "description"}}  a JSON Schema
//                   (llama-server's {"type": "json_schema", "schema": ...} too)
//   grammar "root ::= ..."                                     llama-server's GBNF
// compiled once per request (src/grammar), and the constraint each job's
// sampler applies (sample/constraint.h) over the vocabulary's token trie,
// built once per served vocabulary.
#pragma once

#include <memory>
#include <mutex>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/token_mask.h"
#include "server/api_request.h"
#include "tokenizer/tokenizer.h"

namespace tkv::server {

// The grammar `body` (parsed; `raw` is its text, reread to keep the order of
// a schema's properties) asks for: null when it asks for none, or the 400
// that names the field and the problem (a bad GBNF grammar with its line
// and column, a schema keyword turbokv does not support).
std::variant<std::shared_ptr<const grammar::Grammar>, ApiError> output_grammar(
    const nlohmann::json& body, std::string_view raw);

// The token trie of the served vocabulary, built on first use and shared;
// `spell_control`: control tokens spelled as their text (end-of-generation
// tokens still spell nothing), for replies read with special tokens.
class TokenTrieCache {
 public:
  std::shared_ptr<const grammar::TokenTrie> get(const tok::Tokenizer& tokenizer,
                                                bool spell_control = false);

 private:
  std::mutex mu_;
  std::shared_ptr<const grammar::TokenTrie> trie_, spelled_trie_;
};

// The constraint of one job: `grammar` over `trie`; generation may end (EOS,
// EOT, the template's end-of-turn tokens) only where the grammar accepts.
std::shared_ptr<grammar::GrammarConstraint> output_constraint(
    std::shared_ptr<const grammar::Grammar> grammar, std::shared_ptr<const grammar::TokenTrie> trie,
    const tok::Tokenizer& tokenizer, const std::vector<int32_t>& stop_tokens);

}  // namespace tkv::server
