// POST /v1/responses: the subset of OpenAI's Responses API that the
// official clients' responses.create uses for text, converted into a chat
// request for the scheduler (http_generation.h) and answered as a
// "response" object, whole or as its typed stream of events:
//   response.created, response.in_progress, response.output_item.added,
//   response.content_part.added, response.output_text.delta...,
//   response.output_text.done, response.content_part.done,
//   response.output_item.done, then response.completed (or
//   response.incomplete when max_output_tokens cut the text short, or
//   response.failed on an error), each `event: TYPE` with a
//   sequence_number, and no [DONE].
// Request fields: input (a string, or message items whose content is a
// string or input_text / output_text parts), instructions (a system
// message first), max_output_tokens, temperature, top_p, stream, seed and
// the sampling extensions of chat completions; reasoning.effort and
// text.format {"type": "text"} accepted; store, metadata, user, include,
// truncation, parallel_tool_calls, service_tier, prompt_cache_key,
// safety_identifier ignored; tools, previous_response_id, background and
// other formats a 400 naming them (unless off); anything else unrecognized.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "server/api_request.h"

namespace httplib {
struct Response;
}  // namespace httplib

namespace tkv::server {

class GenerationRoutes;

// The request as the chat request it becomes, or the 400.
std::variant<GenerationRequest, ApiError> parse_responses_request(std::string_view body);

void handle_responses(GenerationRoutes& routes, const std::string& body, httplib::Response& res,
                      bool close_delimited);

}  // namespace tkv::server
