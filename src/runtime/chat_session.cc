#include "runtime/chat_session.h"

#include <charconv>
#include <map>
#include <utility>

#include "common/error.h"
#include "common/escape.h"
#include "common/timer.h"
#include "runtime/session_state.h"
#include "tokenizer/stream_decoder.h"

namespace tkv::runtime {

namespace {

// Stands in for the previous reply when rendering: letters only, so that
// templates that trim or escape message text leave it intact.
constexpr const char* kReplySentinel = "TURBOKVPREVIOUSREPLYSENTINEL";

std::vector<std::string> all_stops(const tok::ChatTemplate& t, std::vector<std::string> user) {
  std::vector<std::string> out = t.stop_strings();
  for (auto& s : user) out.push_back(std::move(s));
  return out;
}

// Names of the chat's strings in the session file (SessionMeta::strings:
// any bytes, so a reply cut inside a multi-byte character is kept as is).
constexpr const char* kTemplateKey = "chat.template";
constexpr const char* kSystemKey = "chat.system_prompt";
constexpr const char* kCountKey = "chat.n_messages";
std::string message_key(size_t i, const char* field) {
  return str("chat.message.", i, ".", field);
}

}  // namespace

ChatSession::ChatSession(Sequence& session, tok::ChatTemplate chat_template,
                         const sample::SamplerConfig& sampling, std::string system_prompt,
                         std::vector<std::string> stops)
    : session_(session),
      template_(std::move(chat_template)),
      system_prompt_(std::move(system_prompt)),
      stops_(all_stops(template_, std::move(stops))),
      stop_tokens_(template_.stop_tokens(session.tokenizer())) {
  // The sequence's sampler serves every turn: the repetition penalty looks
  // at the whole conversation.
  session_.set_sampler(sampling);
  clear();
}

void ChatSession::clear() {
  session_.clear();
  session_.sampler().reset();
  messages_.clear();
  if (!system_prompt_.empty()) messages_.push_back({"system", system_prompt_});
}

std::string ChatSession::render_delta(const std::string& user_text) const {
  std::vector<tok::ChatMessage> next = messages_;
  next.push_back({"user", user_text});
  if (session_.tokens().empty()) return template_.apply(next, /*add_generation_prompt=*/true);
  // Continue after the previous reply: everything the template writes after it.
  for (size_t i = next.size(); i-- > 0;) {
    if (next[i].role != "assistant") continue;
    next[i].content = kReplySentinel;
    const std::string rendered = template_.apply(next, true);
    const size_t at = rendered.rfind(kReplySentinel);
    if (at != std::string::npos) return rendered.substr(at + std::string(kReplySentinel).size());
    break;
  }
  // No previous reply to anchor on (cannot happen in a normal conversation):
  // the difference between the rendered conversation and its extension.
  const std::string before = template_.apply(messages_, false);
  const std::string after = template_.apply(next, true);
  if (after.compare(0, before.size(), before) == 0) return after.substr(before.size());
  return after;
}

ChatReply ChatSession::respond(const std::string& user_text, int64_t max_tokens,
                               const std::atomic<bool>* interrupt,
                               const std::function<void(const std::string&)>& emit) {
  const tok::Tokenizer& tokenizer = session_.tokenizer();
  ChatReply reply;
  std::vector<int32_t> ids;
  if (session_.tokens().empty() && tokenizer.add_bos() && tokenizer.bos() != tok::kNoToken)
    ids.push_back(tokenizer.bos());
  for (int32_t id : tokenizer.encode(render_delta(user_text), false, /*parse_special=*/true))
    ids.push_back(id);
  // Leave room for at least one generated token.
  if (int64_t(ids.size()) + 1 > session_.room()) {
    reply.no_room = true;
    return reply;
  }
  const Stopwatch prefill;
  session_.feed(ids);
  reply.prefill_seconds = prefill.seconds();
  reply.prompt_tokens = int64_t(ids.size());
  for (int32_t id : ids) session_.sampler().accept(id);
  messages_.push_back({"user", user_text});

  GenerateOptions options;
  options.max_tokens = max_tokens;
  options.stop_tokens = stop_tokens_;
  options.interrupt = interrupt;
  TextGenerateResult result = generate_text(
      session_, options,
      ReplyText{
          .stops = stops_, .start = tok::StreamDecoder::Start::kContinuation, .spelled_after = {}},
      [&](std::string_view text) {
        reply.text += text;
        emit(std::string(text));
        return true;
      });
  reply.generation = result.generation;
  reply.stop_string = std::move(result.stop_string);
  messages_.push_back({"assistant", reply.text});
  return reply;
}

void ChatSession::save(const std::string& path) const {
  std::map<std::string, std::string> strings;
  strings[kTemplateKey] = template_.name();
  strings[kSystemKey] = system_prompt_;
  strings[kCountKey] = std::to_string(messages_.size());
  for (size_t i = 0; i < messages_.size(); ++i) {
    strings[message_key(i, "role")] = messages_[i].role;
    strings[message_key(i, "content")] = messages_[i].content;
  }
  session_.save(path, strings);
}

std::string ChatSession::load(const std::string& path) {
  // Read the messages before touching the session, so a file without a
  // conversation leaves the current one as it was; Sequence::load is
  // transactional itself.
  const std::map<std::string, std::string> strings = peek_session(path).strings;
  auto get = [&](const std::string& key) -> const std::string& {
    const auto it = strings.find(key);
    if (it == strings.end()) fail(path, ": no chat conversation in it (no ", key, ")");
    return it->second;
  };
  const std::string& count_text = get(kCountKey);
  size_t count = 0;
  const auto [end, ec] =
      std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
  if (ec != std::errc() || end != count_text.data() + count_text.size() || count > strings.size())
    fail(path, ": no chat conversation in it (bad message count)");
  std::vector<tok::ChatMessage> messages;
  for (size_t i = 0; i < count; ++i)
    messages.push_back({get(message_key(i, "role")), get(message_key(i, "content"))});
  std::string system_prompt = get(kSystemKey);
  const std::string saved_template = escape_bytes(get(kTemplateKey));  // shown: escaped
  session_.load(path);
  messages_ = std::move(messages);
  system_prompt_ = std::move(system_prompt);
  // The repetition penalty looks at the recent history.
  session_.sampler().reset();
  for (int32_t id : session_.tokens()) session_.sampler().accept(id);
  if (!saved_template.empty() && saved_template != template_.name())
    return str("the conversation was saved with chat template ", saved_template, ", this is ",
               template_.name(), " (use --chat-template ", saved_template, ")");
  return {};
}

}  // namespace tkv::runtime
