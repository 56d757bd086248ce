// The server's request parser: arbitrary bytes as the body of both
// POST /v1/chat/completions and POST /v1/completions. Parsing must return
// (never throw or crash); an accepted request must satisfy what the parser
// promises (a sampler config that validates, bounded lists); a rejection
// must be a 4xx/5xx whose error body serializes to JSON on one line. The raw
// bytes also go through the response serializer as generated text, which
// may be any bytes (a token can split a UTF-8 character).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "fuzz_target.h"
#include "server/api_request.h"
#include "server/api_response.h"
#include "server/route_messages.h"
#include "server/route_responses.h"

namespace {

using tkv::server::ApiError;
using tkv::server::GenerationRequest;

#define FUZZ_CHECK(cond)                                        \
  do {                                                          \
    if (!(cond)) {                                              \
      std::fprintf(stderr, "server_request_fuzz: %s\n", #cond); \
      std::abort();                                             \
    }                                                           \
  } while (0)

void check_accepted(const GenerationRequest& r) {
  tkv::sample::validate(tkv::server::sampler_config(r, 1));  // throws on a bad range
  FUZZ_CHECK(r.stop.size() <= size_t(tkv::server::kMaxStopStrings));
  for (const std::string& s : r.stop) FUZZ_CHECK(!s.empty());
  FUZZ_CHECK(!r.max_tokens || *r.max_tokens >= 1);
  FUZZ_CHECK(r.top_logprobs >= 0 && r.top_logprobs <= tkv::server::kMaxChatTopLogprobs);
  FUZZ_CHECK(r.logprobs || r.top_logprobs == 0);
  FUZZ_CHECK(r.stream || !r.include_usage);
  if (r.endpoint == tkv::server::Endpoint::kChatCompletions) {
    FUZZ_CHECK(!r.messages.empty());
    for (const auto& m : r.messages) {
      FUZZ_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant" ||
                 m.role == "tool");
      FUZZ_CHECK(m.role != "tool" || m.fields.contains("tool_call_id"));
    }
    // A named tool choice names a tool that was sent.
    if (r.tool_choice == tkv::server::ToolChoice::kNamed) FUZZ_CHECK(!r.tools.empty());
  } else {
    FUZZ_CHECK(r.messages.empty());
    FUZZ_CHECK(!r.prompts.empty());
    FUZZ_CHECK(r.prompts.size() * size_t(r.n) <= size_t(tkv::server::kMaxChoices));
    for (const auto& p : r.prompts) {
      FUZZ_CHECK(p.is_tokens ? !p.tokens.empty() : p.tokens.empty());
      for (int32_t t : p.tokens) FUZZ_CHECK(t >= 0);
    }
  }
}

void check_rejected(const ApiError& e) {
  FUZZ_CHECK(e.status == 400 || e.status == 500);
  FUZZ_CHECK(!e.message.empty());
  FUZZ_CHECK(e.message.find('\n') == std::string::npos);
  const std::string text = tkv::server::to_json_text(tkv::server::error_json(e));
  FUZZ_CHECK(text.find('\n') == std::string::npos);
  const auto back = tkv::server::Json::parse(text, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(back.is_object() && back.contains("error"));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (const auto& parsed :
       {tkv::server::parse_chat_request(body), tkv::server::parse_completion_request(body),
        tkv::server::parse_responses_request(body), tkv::server::parse_messages_request(body)}) {
    if (const ApiError* e = std::get_if<ApiError>(&parsed)) {
      check_rejected(*e);
    } else {
      check_accepted(std::get<GenerationRequest>(parsed));
    }
  }
  // Any bytes as generated text: the stream chunk serializes to one valid line.
  tkv::server::StreamPiece piece;
  piece.text = std::string(body);
  piece.logprobs_requested = true;
  piece.logprobs.push_back({piece.text, -1.0, {{piece.text, -1.0}}});
  const std::string event = tkv::server::sse_event(
      tkv::server::chat_chunk_json(tkv::server::ResponseMeta{}, piece, true));
  FUZZ_CHECK(event.find('\n') == event.size() - 2);
  return 0;
}
