#include "server/route_tokenize.h"

#include <cstdint>
#include <variant>
#include <vector>

#include "common/escape.h"
#include "server/api_json.h"
#include "server/api_response.h"

namespace tkv::server {

namespace {

using api_json::json;

struct TokenizeRequest {
  std::string content;
  bool add_special = false, parse_special = true, with_pieces = false;
};

constexpr const char* kTokenizeFields[] = {"content", "add_special", "parse_special",
                                           "with_pieces"};
constexpr const char* kDetokenizeFields[] = {"tokens"};

TokenizeRequest parse_tokenize(const std::string& body) {
  const json j = api_json::parse_body(body);
  api_json::check_route_fields(
      j, {.handled = kTokenizeFields, .ignored = {}, .unsupported = {}, .off = {}, .why = {}});
  TokenizeRequest r;
  const json* content = api_json::field(j, "content");
  if (!content) api_json::missing("content");
  r.content = api_json::as_string(*content, "content");
  if (const json* v = api_json::field(j, "add_special"))
    r.add_special = api_json::as_bool(*v, "add_special");
  if (const json* v = api_json::field(j, "parse_special"))
    r.parse_special = api_json::as_bool(*v, "parse_special");
  if (const json* v = api_json::field(j, "with_pieces"))
    r.with_pieces = api_json::as_bool(*v, "with_pieces");
  return r;
}

std::vector<int32_t> parse_detokenize(const std::string& body, int32_t n_vocab) {
  const json j = api_json::parse_body(body);
  api_json::check_route_fields(
      j, {.handled = kDetokenizeFields, .ignored = {}, .unsupported = {}, .off = {}, .why = {}});
  const json* tokens = api_json::field(j, "tokens");
  if (!tokens) api_json::missing("tokens");
  if (!tokens->is_array()) api_json::invalid_type("tokens", "an array", *tokens);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < tokens->size(); ++i)
    ids.push_back(int32_t(
        api_json::as_integer((*tokens)[i], "tokens[" + std::to_string(i) + "]", 0, n_vocab - 1)));
  return ids;
}

}  // namespace

void handle_tokenize(GenerationRoutes& routes, const std::string& body, httplib::Response& res) {
  if (routes.draining()) return send_unavailable(res, "The server is shutting down.");
  std::variant<TokenizeRequest, ApiError> parsed =
      api_json::guarded<TokenizeRequest>([&] { return parse_tokenize(body); });
  if (const ApiError* error = std::get_if<ApiError>(&parsed)) return send_api_error(res, *error);
  const TokenizeRequest& r = std::get<TokenizeRequest>(parsed);
  const tok::Tokenizer& tokenizer = *routes.model().tokenizer;
  const std::vector<int32_t> ids = tokenizer.encode(r.content, r.add_special, r.parse_special);
  Json tokens = Json::array();
  for (int32_t id : ids) {
    if (!r.with_pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string& piece = tokenizer.token_to_piece(id, /*render_special=*/true);
    Json entry{{"id", id}};
    if (is_valid_utf8(piece)) {
      entry["piece"] = piece;
    } else {
      entry["piece"] = Json::array();
      for (unsigned char c : piece) entry["piece"].push_back(int(c));
    }
    tokens.push_back(std::move(entry));
  }
  res.set_content(to_json_text(Json{{"tokens", std::move(tokens)}}), "application/json");
}

void handle_detokenize(GenerationRoutes& routes, const std::string& body, httplib::Response& res) {
  if (routes.draining()) return send_unavailable(res, "The server is shutting down.");
  const tok::Tokenizer& tokenizer = *routes.model().tokenizer;
  std::variant<std::vector<int32_t>, ApiError> parsed = api_json::guarded<std::vector<int32_t>>(
      [&] { return parse_detokenize(body, tokenizer.n_vocab()); });
  if (const ApiError* error = std::get_if<ApiError>(&parsed)) return send_api_error(res, *error);
  const std::string text = tokenizer.decode(std::get<std::vector<int32_t>>(parsed), true);
  res.set_content(to_json_text(Json{{"content", text}}), "application/json");
}

}  // namespace tkv::server
