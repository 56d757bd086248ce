// POST /v1/messages and POST /v1/messages/count_tokens: Anthropic's
// Messages API over the chat job machinery (http_generation.h).
//
// Request: model, max_tokens (required, >= 1), messages (user / assistant;
// content a string or blocks: text, tool_use and tool_result -- the last two
// rendered into the conversation as text, since turbokv does not call
// tools), system (a string or text blocks), temperature, top_p, top_k,
// stop_sequences, stream, metadata (ignored), and the sampling extensions
// of chat completions (seed, penalties, logit_bias, cache_prompt). tools,
// tool_choice and thinking are a 400 unless off (tools: [],
// tool_choice {"type": "none"} or "auto", thinking {"type": "disabled"});
// image and document blocks are a 400.
//
// Response: {"id": "msg_...", "type": "message", "role": "assistant",
// "content": [{"type": "text", "text"}], "stop_reason": "end_turn" |
// "max_tokens" | "stop_sequence", "stop_sequence", "usage": {input_tokens,
// output_tokens, cache_read_input_tokens, cache_creation_input_tokens}};
// streamed as message_start, content_block_start, ping,
// content_block_delta (text_delta)..., content_block_stop, message_delta
// (stop_reason, usage.output_tokens), message_stop, each `event: TYPE`.
// Errors are Anthropic's: {"type": "error", "error": {"type", "message"}}.
// count_tokens answers {"input_tokens": N}: the rendered prompt's tokens.
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

// Anthropic's error object for an ApiError: its type from the status
// (invalid_request_error, authentication_error, permission_error,
// not_found_error, request_too_large, rate_limit_error, api_error,
// overloaded_error for 503).
std::string anthropic_error_text(const ApiError& error);

// The request as the chat request it becomes, or the 400.
// `count_only`: count_tokens' body (max_tokens not required).
std::variant<GenerationRequest, ApiError> parse_messages_request(std::string_view body,
                                                                 bool count_only = false);

void handle_messages(GenerationRoutes& routes, const std::string& body, httplib::Response& res,
                     bool close_delimited);
void handle_count_tokens(GenerationRoutes& routes, const std::string& body, httplib::Response& res);

}  // namespace tkv::server
