#include "chat_session.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/escape.h"
#include "common/timer.h"
#include "session_state.h"
#include "tokenizer/stream_decoder.h"

namespace tkv::cli {

namespace {

// Stands in for the previous reply when rendering: letters only, so that
// templates that trim or escape message text leave it intact.
constexpr const char* kReplySentinel = "TURBOKVPREVIOUSREPLYSENTINEL";

std::vector<std::string> all_stops(const tok::ChatTemplate& t, std::vector<std::string> user) {
  std::vector<std::string> out = t.stop_strings();
  for (auto& s : user) out.push_back(std::move(s));
  return out;
}

// Message text is bytes: what the user typed, or a reply the model may have
// cut inside a multi-byte character. JSON holds UTF-8 only, so text that is
// not valid UTF-8 is stored as hex under "<key>_hex" instead of "<key>".
void put_text(nlohmann::json& j, const std::string& key, const std::string& bytes) {
  if (is_valid_utf8(bytes))
    j[key] = bytes;
  else
    j[key + "_hex"] = to_hex(bytes);
}

std::string get_text(const nlohmann::json& j, const std::string& key) {
  if (j.contains(key + "_hex")) {
    const auto bytes = from_hex(j.at(key + "_hex").get<std::string>());
    if (!bytes) fail(key, "_hex is not hex");
    return *bytes;
  }
  return j.value(key, std::string());
}

}  // namespace

ChatSession::ChatSession(InferenceSession& session, tok::ChatTemplate chat_template,
                         const sample::SamplerConfig& sampling, std::string system_prompt,
                         std::vector<std::string> stops)
    : session_(session),
      template_(std::move(chat_template)),
      sampler_(sampling),
      system_prompt_(std::move(system_prompt)),
      stops_(all_stops(template_, std::move(stops))),
      stop_tokens_(template_.stop_tokens(session.tokenizer())) {
  clear();
}

void ChatSession::clear() {
  session_.clear();
  sampler_.reset();
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
  for (int32_t id : ids) sampler_.accept(id);
  messages_.push_back({"user", user_text});

  tok::StreamDecoder decoder(tokenizer, tok::StreamDecoder::Start::kContinuation);
  StopMatcher matcher(stops_);
  auto show = [&](const std::string& text) {
    if (text.empty()) return;
    reply.text += text;
    emit(text);
  };
  GenerateOptions options;
  options.max_tokens = max_tokens;
  options.stop_tokens = stop_tokens_;
  options.interrupt = interrupt;
  reply.generation = generate(session_, sampler_, options, [&](int32_t id) {
    show(matcher.push(decoder.push(id)));
    return !matcher.stopped();
  });
  show(matcher.push(decoder.flush()));
  show(matcher.flush());
  reply.stop_string = matcher.matched();
  messages_.push_back({"assistant", reply.text});
  return reply;
}

void ChatSession::save(const std::string& path) const {
  nlohmann::json extra;
  extra["chat_template"] = template_.name();
  put_text(extra, "system_prompt", system_prompt_);
  nlohmann::json messages = nlohmann::json::array();
  for (const auto& m : messages_) {
    nlohmann::json message = {{"role", m.role}};
    put_text(message, "content", m.content);
    messages.push_back(std::move(message));
  }
  extra["messages"] = std::move(messages);
  save_session(path, session_, &extra);
}

std::string ChatSession::load(const std::string& path) {
  // Parse the messages before touching the session, so a bad file leaves
  // the current conversation as it was.
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(path, ": session file does not exist");
  const std::string sidecar = session_sidecar_path(path);
  nlohmann::json extra;
  std::vector<tok::ChatMessage> messages;
  std::string system_prompt;
  const std::string state = read_file(sidecar);
  try {
    extra = nlohmann::json::parse(state).at("extra");
    for (const auto& m : extra.at("messages")) {
      if (!m.contains("content") && !m.contains("content_hex")) fail("a message without content");
      messages.push_back({m.at("role").get<std::string>(), get_text(m, "content")});
    }
    system_prompt = get_text(extra, "system_prompt");
  } catch (const nlohmann::json::exception& e) {
    fail(sidecar, ": no chat conversation in it (", escape_bytes(e.what()), ")");
  } catch (const Error& e) {
    fail(sidecar, ": no chat conversation in it (", e.what(), ")");
  }
  load_session(path, session_);
  messages_ = std::move(messages);
  system_prompt_ = std::move(system_prompt);
  // The repetition penalty looks at the recent history.
  sampler_.reset();
  for (int32_t id : session_.tokens()) sampler_.accept(id);
  // From the file: escaped before it is shown.
  const std::string saved_template = escape_bytes(extra.value("chat_template", std::string()));
  if (!saved_template.empty() && saved_template != template_.name())
    return str("the conversation was saved with chat template ", saved_template, ", this is ",
               template_.name(), " (use --chat-template ", saved_template, ")");
  return {};
}

}  // namespace tkv::cli
