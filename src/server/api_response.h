// The response side of the OpenAI-compatible protocol: the JSON bodies of
// chat.completion, chat.completion.chunk, text_completion (whole and
// streamed), the model list and error objects, shaped as the OpenAI API
// reference defines them, plus the server-sent-events framing of a stream.
//
// The front end fills plain structs (ResponseMeta, Usage, a finished
// CompletionChoice or a StreamPiece with TokenLogprob entries) and sends
// to_json_text() of what these return. Keys keep OpenAI's order
// (ordered_json) so that bodies read like the API's examples.
//
// Streams, as OpenAI sends them:
//   chat:        first chunk   delta {"role": "assistant", "content": ""}
//                text chunks   delta {"content": "..."}, finish_reason null
//                last chunk    delta {}, finish_reason "stop" | "length"
//   completions: text chunks   {"text": "...", finish_reason null}, the last
//                one with its finish_reason (its text may be "")
//   include_usage: every chunk carries "usage": null, and one more chunk
//                with "choices": [] and the usage follows the last one;
//   then "data: [DONE]".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_request.h"

namespace tkv::server {

using Json = nlohmann::ordered_json;

enum class FinishReason {
  kNone,       // not finished (a streamed chunk before the last): null
  kStop,       // end-of-generation token or a stop string: "stop"
  kLength,     // max_tokens or the end of the context: "length"
  kToolCalls,  // the reply ended with tool calls: "tool_calls"
};

// "stop", "length", "tool_calls", or JSON null for kNone.
Json finish_reason_json(FinishReason reason);

struct ResponseMeta {
  std::string id;       // response_id(); the same in every chunk of a stream
  std::string model;    // the served model's name
  int64_t created = 0;  // Unix seconds; the same in every chunk of a stream
};

// "chatcmpl-<16 hex digits>" or "cmpl-<16 hex digits>" from a number the
// caller makes unique (a counter mixed with a random start).
std::string response_id(Endpoint endpoint, uint64_t unique);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
};

// {"prompt_tokens", "completion_tokens", "total_tokens",
//  "prompt_tokens_details": {"cached_tokens"}}.
Json usage_json(const Usage& usage);

// One candidate at a token position. `token` is the token's raw bytes
// (possibly part of a UTF-8 character; chat's "bytes" field carries them
// exactly, the "token" string shows them with U+FFFD where invalid).
struct TopLogprob {
  std::string token;
  double logprob = 0;
};

// The chosen token at one position and the most likely alternatives
// (most likely first; as many as the request's top_logprobs). JSON has no
// -inf: logprobs below -9999 (and non-finite ones) are written as -9999.0,
// OpenAI's value for "very unlikely".
struct TokenLogprob {
  std::string token;
  double logprob = 0;
  std::vector<TopLogprob> top;
};

// A tool call of a reply: {"id", "type": "function", "function": {"name",
// "arguments"}} (arguments as JSON text).
struct ToolCallOut {
  std::string id;
  std::string name;
  std::string arguments;
};

// A finished choice of a non-streamed response.
struct CompletionChoice {
  int index = 0;  // OpenAI's choice index: prompt i, choice j of n -> i * n + j
  std::string text;
  // Chat: the reply's reasoning (reasoning_content, left out when empty)
  // and tool calls (tool_calls, left out when none; content is then null
  // when the reply has no other text).
  std::string reasoning;
  std::vector<ToolCallOut> tool_calls;
  FinishReason finish_reason = FinishReason::kStop;
  bool logprobs_requested = false;     // false: "logprobs": null
  std::vector<TokenLogprob> logprobs;  // one per generated token
  int64_t prompt_bytes = 0;            // completions: starts text_offset
};

// {"id", "type": "function", "function": {"name", "arguments"}}; a stream's
// delta entries begin with "index" (index >= 0).
Json tool_call_json(const ToolCallOut& call, int index = -1);

// Chat: {"content": [{token, logprob, bytes, top_logprobs: [{token,
// logprob, bytes}]}], "refusal": null}.
Json chat_logprobs_json(const std::vector<TokenLogprob>& tokens);

// Completions: {"tokens": [...], "token_logprobs": [...], "top_logprobs":
// [{token: logprob, ...}], "text_offset": [...]}. A position's top_logprobs
// map holds the alternatives and the chosen token (OpenAI returns up to
// logprobs + 1 entries). text_offset counts bytes: the first token's offset
// is `text_offset_start` (OpenAI counts from the start of the prompt: pass
// the prompt's length plus the text already sent in earlier chunks).
Json completion_logprobs_json(const std::vector<TokenLogprob>& tokens, int64_t text_offset_start);

// object "chat.completion": choices[{index, message {role, content,
// reasoning_content?, tool_calls?, refusal}, logprobs, finish_reason}],
// usage.
Json chat_completion_json(const ResponseMeta& meta, const CompletionChoice& choice,
                          const Usage& usage);
// The same with several choices (n > 1), in the order given.
Json chat_completion_json(const ResponseMeta& meta, const std::vector<CompletionChoice>& choices,
                          const Usage& usage);

// object "text_completion": choices[{text, index, logprobs, finish_reason}],
// usage. `prompt_bytes` starts text_offset (see completion_logprobs_json).
Json text_completion_json(const ResponseMeta& meta, const CompletionChoice& choice,
                          const Usage& usage, int64_t prompt_bytes);
// Several choices, each with its own prompt_bytes.
Json text_completion_json(const ResponseMeta& meta, const std::vector<CompletionChoice>& choices,
                          const Usage& usage);

// One streamed piece: the text of the tokens decoded since the last chunk
// and their logprob entries; `finish_reason` set on the last piece only.
struct StreamPiece {
  int index = 0;       // the choice's index
  bool first = false;  // chat: the delta opens with "role": "assistant"
  std::string text;
  // Chat: reasoning text, and whole tool calls (each one delta entry with
  // its id, name and all its arguments: clients join entries by `index`,
  // which counts the choice's calls from first_call).
  std::string reasoning;
  std::vector<ToolCallOut> calls;
  int first_call = 0;
  FinishReason finish_reason = FinishReason::kNone;
  bool logprobs_requested = false;
  std::vector<TokenLogprob> logprobs;
  int64_t text_offset_start = 0;  // completions: see completion_logprobs_json
};

// object "chat.completion.chunk". A delta holds reasoning_content, content
// and tool_calls, each when the piece has it (content "" on a piece with
// nothing else); a finished piece's delta holds only what it still carries
// ({} when nothing). include_usage adds "usage": null.
Json chat_chunk_json(const ResponseMeta& meta, const StreamPiece& piece, bool include_usage);

// object "text_completion" (OpenAI names stream chunks the same).
Json completion_chunk_json(const ResponseMeta& meta, const StreamPiece& piece, bool include_usage);

// The chunk after the last one when include_usage: "choices": [], usage.
Json chat_usage_chunk_json(const ResponseMeta& meta, const Usage& usage);
Json completion_usage_chunk_json(const ResponseMeta& meta, const Usage& usage);

// {"error": {"message", "type", "param", "code"}}; param and code are null
// when empty.
Json error_json(const ApiError& error);

struct ModelEntry {
  std::string id;
  int64_t created = 0;
  std::string owned_by = "turbokv";
};

// GET /v1/models: {"object": "list", "data": [{id, object: "model",
// created, owned_by}]}.
Json model_list_json(const std::vector<ModelEntry>& models);

// Serializes a body. Invalid UTF-8 (a token that splits a character) is
// written as U+FFFD instead of throwing.
std::string to_json_text(const Json& body);

// Server-sent events: "data: <json>\n\n" and the terminator "data: [DONE]\n\n".
std::string sse_event(const Json& body);
std::string_view sse_done();

}  // namespace tkv::server
