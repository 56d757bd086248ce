#include "server/api_response.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace tkv::server {

namespace {

constexpr const char* kChatObject = "chat.completion";
constexpr const char* kChatChunkObject = "chat.completion.chunk";
// OpenAI names whole completions and their stream chunks the same.
constexpr const char* kCompletionObject = "text_completion";

constexpr double kMinLogprob = -9999.0;

Json null_if_empty(const std::string& s) {
  return s.empty() ? Json(nullptr) : Json(s);
}

// The UTF-8 bytes of a token as integers, as chat logprobs report them.
Json token_bytes(const std::string& token) {
  Json bytes = Json::array();
  for (const char c : token) bytes.push_back(int(static_cast<unsigned char>(c)));
  return bytes;
}

// JSON has no -inf: a token the model rules out gets OpenAI's "very
// unlikely" value -9999.0, as do NaNs (never expected).
double logprob_value(double logprob) {
  return std::isfinite(logprob) && logprob > kMinLogprob ? logprob : kMinLogprob;
}

Json envelope(const ResponseMeta& meta, const char* object) {
  Json j;
  j["id"] = meta.id;
  j["object"] = object;
  j["created"] = meta.created;
  j["model"] = meta.model;
  return j;
}

Json choice_logprobs(const CompletionChoice& choice, bool chat, int64_t text_offset_start) {
  if (!choice.logprobs_requested) return nullptr;
  return chat ? chat_logprobs_json(choice.logprobs)
              : completion_logprobs_json(choice.logprobs, text_offset_start);
}

Json piece_logprobs(const StreamPiece& piece, bool chat) {
  if (!piece.logprobs_requested) return nullptr;
  return chat ? chat_logprobs_json(piece.logprobs)
              : completion_logprobs_json(piece.logprobs, piece.text_offset_start);
}

}  // namespace

Json finish_reason_json(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kToolCalls:
      return "tool_calls";
    case FinishReason::kNone:
      break;
  }
  return nullptr;
}

std::string response_id(Endpoint endpoint, uint64_t unique) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016" PRIx64, unique);
  return std::string(endpoint == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-") + hex;
}

Json usage_json(const Usage& usage) {
  Json j;
  j["prompt_tokens"] = usage.prompt_tokens;
  j["completion_tokens"] = usage.completion_tokens;
  j["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  j["prompt_tokens_details"] = {{"cached_tokens", usage.cached_tokens}};
  return j;
}

Json chat_logprobs_json(const std::vector<TokenLogprob>& tokens) {
  Json content = Json::array();
  for (const TokenLogprob& t : tokens) {
    Json top = Json::array();
    for (const TopLogprob& alt : t.top) {
      Json a;
      a["token"] = alt.token;
      a["logprob"] = logprob_value(alt.logprob);
      a["bytes"] = token_bytes(alt.token);
      top.push_back(std::move(a));
    }
    Json entry;
    entry["token"] = t.token;
    entry["logprob"] = logprob_value(t.logprob);
    entry["bytes"] = token_bytes(t.token);
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  Json j;
  j["content"] = std::move(content);
  j["refusal"] = nullptr;
  return j;
}

Json completion_logprobs_json(const std::vector<TokenLogprob>& tokens, int64_t text_offset_start) {
  Json text = Json::array(), logprobs = Json::array(), top = Json::array(), offsets = Json::array();
  int64_t offset = text_offset_start;
  for (const TokenLogprob& t : tokens) {
    text.push_back(t.token);
    logprobs.push_back(logprob_value(t.logprob));
    Json alternatives = Json::object();
    for (const TopLogprob& alt : t.top) alternatives[alt.token] = logprob_value(alt.logprob);
    alternatives[t.token] = logprob_value(t.logprob);  // the chosen token is always listed
    top.push_back(std::move(alternatives));
    offsets.push_back(offset);
    offset += int64_t(t.token.size());
  }
  Json j;
  j["tokens"] = std::move(text);
  j["token_logprobs"] = std::move(logprobs);
  j["top_logprobs"] = std::move(top);
  j["text_offset"] = std::move(offsets);
  return j;
}

Json tool_call_json(const ToolCallOut& call, int index) {
  Json j;
  if (index >= 0) j["index"] = index;
  j["id"] = call.id;
  j["type"] = "function";
  j["function"] = {{"name", call.name}, {"arguments", call.arguments}};
  return j;
}

Json chat_completion_json(const ResponseMeta& meta, const CompletionChoice& choice,
                          const Usage& usage) {
  return chat_completion_json(meta, std::vector<CompletionChoice>{choice}, usage);
}

Json chat_completion_json(const ResponseMeta& meta, const std::vector<CompletionChoice>& choices,
                          const Usage& usage) {
  Json list = Json::array();
  for (const CompletionChoice& choice : choices) {
    Json message;
    message["role"] = "assistant";
    if (choice.text.empty() && !choice.tool_calls.empty())
      message["content"] = nullptr;
    else
      message["content"] = choice.text;
    if (!choice.reasoning.empty()) message["reasoning_content"] = choice.reasoning;
    if (!choice.tool_calls.empty()) {
      Json calls = Json::array();
      for (const ToolCallOut& call : choice.tool_calls) calls.push_back(tool_call_json(call));
      message["tool_calls"] = std::move(calls);
    }
    message["refusal"] = nullptr;
    Json c;
    c["index"] = choice.index;
    c["message"] = std::move(message);
    c["logprobs"] = choice_logprobs(choice, /*chat=*/true, 0);
    c["finish_reason"] = finish_reason_json(choice.finish_reason);
    list.push_back(std::move(c));
  }
  Json j = envelope(meta, kChatObject);
  j["choices"] = std::move(list);
  j["usage"] = usage_json(usage);
  return j;
}

Json text_completion_json(const ResponseMeta& meta, const CompletionChoice& choice,
                          const Usage& usage, int64_t prompt_bytes) {
  CompletionChoice one = choice;
  one.prompt_bytes = prompt_bytes;
  return text_completion_json(meta, std::vector<CompletionChoice>{std::move(one)}, usage);
}

Json text_completion_json(const ResponseMeta& meta, const std::vector<CompletionChoice>& choices,
                          const Usage& usage) {
  Json list = Json::array();
  for (const CompletionChoice& choice : choices) {
    Json c;
    c["text"] = choice.text;
    c["index"] = choice.index;
    c["logprobs"] = choice_logprobs(choice, /*chat=*/false, choice.prompt_bytes);
    c["finish_reason"] = finish_reason_json(choice.finish_reason);
    list.push_back(std::move(c));
  }
  Json j = envelope(meta, kCompletionObject);
  j["choices"] = std::move(list);
  j["usage"] = usage_json(usage);
  return j;
}

Json chat_chunk_json(const ResponseMeta& meta, const StreamPiece& piece, bool include_usage) {
  Json delta = Json::object();
  if (piece.first) delta["role"] = "assistant";
  if (!piece.reasoning.empty()) delta["reasoning_content"] = piece.reasoning;
  // The last chunk of a stream carries only what is left ({} if nothing);
  // every other chunk carries content, even "", unless it has other news.
  const bool other = !piece.reasoning.empty() || !piece.calls.empty();
  if (!piece.text.empty() || piece.first || (piece.finish_reason == FinishReason::kNone && !other))
    delta["content"] = piece.text;
  if (!piece.calls.empty()) {
    Json calls = Json::array();
    for (size_t i = 0; i < piece.calls.size(); ++i) {
      calls.push_back(tool_call_json(piece.calls[i], piece.first_call + int(i)));
    }
    delta["tool_calls"] = std::move(calls);
  }
  Json c;
  c["index"] = piece.index;
  c["delta"] = std::move(delta);
  c["logprobs"] = piece_logprobs(piece, /*chat=*/true);
  c["finish_reason"] = finish_reason_json(piece.finish_reason);
  Json j = envelope(meta, kChatChunkObject);
  j["choices"] = Json::array({std::move(c)});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

Json completion_chunk_json(const ResponseMeta& meta, const StreamPiece& piece, bool include_usage) {
  Json c;
  c["text"] = piece.text;
  c["index"] = piece.index;
  c["logprobs"] = piece_logprobs(piece, /*chat=*/false);
  c["finish_reason"] = finish_reason_json(piece.finish_reason);
  Json j = envelope(meta, kCompletionObject);
  j["choices"] = Json::array({std::move(c)});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

Json chat_usage_chunk_json(const ResponseMeta& meta, const Usage& usage) {
  Json j = envelope(meta, kChatChunkObject);
  j["choices"] = Json::array();
  j["usage"] = usage_json(usage);
  return j;
}

Json completion_usage_chunk_json(const ResponseMeta& meta, const Usage& usage) {
  Json j = envelope(meta, kCompletionObject);
  j["choices"] = Json::array();
  j["usage"] = usage_json(usage);
  return j;
}

Json error_json(const ApiError& error) {
  Json e;
  e["message"] = error.message;
  e["type"] = error.type;
  e["param"] = null_if_empty(error.param);
  e["code"] = null_if_empty(error.code);
  Json j;
  j["error"] = std::move(e);
  return j;
}

Json model_list_json(const std::vector<ModelEntry>& models) {
  Json data = Json::array();
  for (const ModelEntry& m : models) {
    Json entry;
    entry["id"] = m.id;
    entry["object"] = "model";
    entry["created"] = m.created;
    entry["owned_by"] = m.owned_by;
    data.push_back(std::move(entry));
  }
  Json j;
  j["object"] = "list";
  j["data"] = std::move(data);
  return j;
}

std::string to_json_text(const Json& body) {
  return body.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

std::string sse_event(const Json& body) {
  return "data: " + to_json_text(body) + "\n\n";
}

std::string_view sse_done() {
  return "data: [DONE]\n\n";
}

}  // namespace tkv::server
