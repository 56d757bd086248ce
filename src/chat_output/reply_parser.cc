// ReplyParser: a small state machine over the text not yet returned. Each
// mode looks for the markers that end it; text before a marker is certain,
// text that may still become one (a marker's prefix at the end, the
// whitespace before it, an unfinished UTF-8 sequence) waits for the next
// feed. Because every decision depends only on the text up to a marker,
// feeding a reply in pieces gives what feeding it whole gives.
#include <algorithm>
#include <utility>

#include "chat_output/call_parse.h"
#include "chat_output/reply_syntax.h"

namespace tkv::chat {
namespace {

using detail::is_space;
constexpr size_t npos = std::string_view::npos;
constexpr std::string_view kHarmonyMessage = "<|message|>";

// The earliest marker in `text`: its position and index (npos if none).
std::pair<size_t, size_t> find_first(std::string_view text,
                                     const std::vector<std::string>& markers) {
  std::pair<size_t, size_t> best{npos, 0};
  for (size_t i = 0; i < markers.size(); ++i) {
    const size_t at = text.find(markers[i]);
    if (at < best.first) best = {at, i};
  }
  return best;
}

// The bytes of an unfinished UTF-8 sequence at the end of `text`.
size_t utf8_partial(std::string_view text) {
  for (size_t k = 1; k <= 3 && k <= text.size(); ++k) {
    const auto c = static_cast<unsigned char>(text[text.size() - k]);
    if ((c & 0xC0) == 0x80) continue;
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > k ? k : 0;
  }
  return 0;
}

// How many bytes at the end of `text` must wait: a proper prefix of a
// marker or an unfinished character, and the whitespace before it (dropped
// if a marker follows).
size_t held_tail(std::string_view text, const std::vector<std::string>& markers) {
  size_t k = utf8_partial(text);
  for (const std::string& m : markers)
    for (size_t len = std::min(m.size() - 1, text.size()); len > k; --len)
      if (text.substr(text.size() - len) == std::string_view(m).substr(0, len)) {
        k = len;
        break;
      }
  size_t i = text.size() - k;
  while (i > 0 && is_space(text[i - 1])) --i;
  return text.size() - i;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// Whether the prompt leaves a reasoning section open for the model.
bool opens_reasoning(const ReplySyntax& s, std::string_view prompt) {
  if (s.reasoning_open.empty()) return false;
  const size_t open = prompt.rfind(s.reasoning_open);
  return open != npos && prompt.find(s.reasoning_close, open) == npos;
}

// Harmony: whether `text` may be (the start of) a message header at most
// `limit` bytes long (the one '<' of <|message|> starts any part of it). What holds for a text
// holds for its prefixes, so a header is told apart the same way however the reply was cut.
bool could_be_header(std::string_view text, size_t limit) {
  if (text.size() > limit) return false;
  for (std::string_view h :
       {"<|channel|>", "<|start|>", "assistant", " to=", "to=", "<|constrain|>"})
    if (starts_with(text, h) || starts_with(h, text)) return true;
  return false;
}

std::string harmony_channel(std::string_view header) {
  const size_t at = header.find("<|channel|>");
  if (at == npos) return "";
  std::string channel;
  for (char c : header.substr(at + 11)) {
    if (!(c >= 'a' && c <= 'z')) break;
    channel += c;
  }
  return channel;
}

}  // namespace

ReplyParser::ReplyParser(ReplySyntax syntax, std::string_view prompt, bool parse_tools)
    : syntax_(std::move(syntax)), parse_tools_(parse_tools && syntax_.tools != ToolSyntax::kNone) {
  if (syntax_.tools == ToolSyntax::kHarmony)
    mode_ = Mode::kHarmonyHeader;
  else if (opens_reasoning(syntax_, prompt))
    mode_ = Mode::kReasoning;
  else if (syntax_.tools == ToolSyntax::kLlama3Json && parse_tools_)
    mode_ = Mode::kStart;
}

ReplyDelta ReplyParser::feed(std::string_view text) {
  buffer_.append(text);
  ReplyDelta out;
  while (step(false, out)) {
  }
  return out;
}

ReplyDelta ReplyParser::finish() {
  ReplyDelta out;
  while (step(true, out)) {
  }
  buffer_.clear();
  return out;
}

bool ReplyParser::step(bool final, ReplyDelta& out) {
  switch (mode_) {
    case Mode::kStart:
      return start_step(final);
    case Mode::kContent:
    case Mode::kReasoning:
      return text_step(final, out);
    case Mode::kCall:
      return call_step(final, out);
    case Mode::kHarmonyHeader:
      return harmony_header_step(final);
  }
  return false;
}

void ReplyParser::emit(std::string& field, std::string_view text) {
  if (skip_space_) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    if (!text.empty()) skip_space_ = false;
  }
  field.append(text);
}

// Llama 3: a reply that starts with a JSON object (or <|python_tag|>) is
// read as a call; anything else makes the rest content.
bool ReplyParser::start_step(bool final) {
  size_t i = 0;
  while (i < buffer_.size() && is_space(buffer_[i])) ++i;
  buffer_.erase(0, i);
  if (buffer_.empty()) return false;
  const std::string tag = detail::call_frame(syntax_.tools).open;
  if (starts_with(buffer_, tag)) {
    buffer_.erase(0, tag.size());
    call_open_ = tag;
    mode_ = Mode::kCall;
  } else if (buffer_[0] == '{') {
    call_open_.clear();
    mode_ = Mode::kCall;
  } else if (!final && starts_with(tag, buffer_)) {
    return false;
  } else {
    mode_ = Mode::kContent;
  }
  return true;
}

bool ReplyParser::text_step(bool final, ReplyDelta& out) {
  std::vector<std::string> markers;
  if (syntax_.tools == ToolSyntax::kHarmony) {
    markers = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};
  } else if (mode_ == Mode::kReasoning) {
    markers = {syntax_.reasoning_close};
  } else {
    if (!syntax_.reasoning_open.empty()) markers.push_back(syntax_.reasoning_open);
    if (parse_tools_) markers.push_back(detail::call_frame(syntax_.tools).open);
  }
  std::string& field = mode_ == Mode::kReasoning ? out.reasoning : out.content;
  const auto [at, which] = find_first(buffer_, markers);
  if (at == npos) {
    const size_t keep = final ? 0 : held_tail(buffer_, markers);
    emit(field, std::string_view(buffer_).substr(0, buffer_.size() - keep));
    buffer_.erase(0, buffer_.size() - keep);
    return false;
  }
  std::string_view before = std::string_view(buffer_).substr(0, at);
  while (!before.empty() && is_space(before.back())) before.remove_suffix(1);
  emit(field, before);
  const std::string marker = markers[which];
  const std::string space = buffer_.substr(before.size(), at - before.size());
  buffer_.erase(0, at + marker.size());
  on_marker(marker, space);
  return true;
}

// `space`: the whitespace dropped before the marker (a call that fails to
// read gives it back with its text).
void ReplyParser::on_marker(const std::string& marker, const std::string& space) {
  skip_space_ = true;
  if (syntax_.tools == ToolSyntax::kHarmony) {
    mode_ = Mode::kHarmonyHeader;
  } else if (mode_ == Mode::kReasoning) {
    mode_ = Mode::kContent;
  } else if (marker == syntax_.reasoning_open) {
    mode_ = Mode::kReasoning;
  } else {
    call_open_ = space + marker;
    mode_ = Mode::kCall;
  }
}

bool ReplyParser::call_step(bool final, ReplyDelta& out) {
  const auto end = detail::find_call_end(syntax_.tools, buffer_, call_scan_);
  const bool harmony = syntax_.tools == ToolSyntax::kHarmony;
  if (!end) {
    if (!final) return false;
    // A harmony call message ends with <|call|>, an end-of-generation token
    // that never reaches the text: at the end, a whole body is a call.
    if (harmony && parse_tools_)
      if (auto call = detail::parse_harmony_call(harmony_header_, buffer_)) {
        out.calls.push_back(std::move(*call));
        buffer_.clear();
        mode_ = Mode::kHarmonyHeader;
        call_scan_ = {};
        return false;
      }
    out.content += call_open_ + buffer_;  // unfinished: as written
    buffer_.clear();
    mode_ = Mode::kContent;
    call_scan_ = {};
    return false;
  }
  call_scan_ = {};  // the next call starts its own search
  const std::string_view body = std::string_view(buffer_).substr(0, end->body);
  std::optional<std::vector<ToolCall>> calls;
  if (parse_tools_ && harmony) {
    if (auto call = detail::parse_harmony_call(harmony_header_, body))
      calls = std::vector<ToolCall>{std::move(*call)};
  } else if (parse_tools_) {
    calls = detail::parse_calls(syntax_.tools, body);
  }
  if (calls) {
    for (ToolCall& c : *calls) out.calls.push_back(std::move(c));
    mode_ = syntax_.tools == ToolSyntax::kLlama3Json ? Mode::kStart : Mode::kContent;
  } else {
    out.content += call_open_ + buffer_.substr(0, end->consumed);
    mode_ = Mode::kContent;
  }
  skip_space_ = bool(calls);
  if (harmony) mode_ = Mode::kHarmonyHeader;
  buffer_.erase(0, end->consumed);
  return true;
}

bool ReplyParser::harmony_header_step(bool final) {
  // A header is at most 256 bytes; before its <|message|> is all there,
  // the buffer may also end with that marker's first bytes.
  const size_t at = buffer_.find(kHarmonyMessage);
  std::string_view head = std::string_view(buffer_).substr(0, at);
  if (at == npos) {
    const size_t lt = head.rfind('<');
    if (lt != npos && starts_with(kHarmonyMessage, head.substr(lt))) head = head.substr(0, lt);
  }
  const bool header = could_be_header(head, 256);
  if (!header || (at == npos && final)) {
    mode_ = Mode::kContent;  // not a header: plain text up to the next message
    return true;
  }
  if (at == npos) return false;
  harmony_header_ = buffer_.substr(0, at);
  buffer_.erase(0, at + kHarmonyMessage.size());
  skip_space_ = true;
  if (harmony_header_.find("to=functions.") != npos) {
    call_open_ = harmony_header_ + std::string(kHarmonyMessage);
    mode_ = Mode::kCall;
  } else {
    mode_ = harmony_channel(harmony_header_) == "analysis" ? Mode::kReasoning : Mode::kContent;
  }
  return true;
}

}  // namespace tkv::chat
