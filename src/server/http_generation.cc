#include "server/http_generation.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/error.h"
#include "runtime/prompt_check.h"
#include "server/api_response.h"
#include "server/http_connection.h"

namespace tkv::server {
namespace {

using Clock = std::chrono::steady_clock;

// How long a response waits for the next event before it looks at its
// connection again: a client that went away is noticed within this.
constexpr std::chrono::milliseconds kPollInterval{200};

uint64_t random_u64() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ uint64_t(rd());
}

// A body sent as it is made: chunked, or (HTTP/1.0) ended by closing the
// connection.
void provide(httplib::Response& res, bool close_delimited, const char* type,
             httplib::ContentProviderWithoutLength provider) {
  if (close_delimited)
    res.set_content_provider(type, std::move(provider));
  else
    res.set_chunked_content_provider(type, std::move(provider));
}

// As `turbokv run` and `turbokv chat` do: BOS when the vocabulary asks for
// it, special-token text (template markers) as their tokens.
std::vector<int32_t> text_ids(const tok::Tokenizer& tokenizer, const std::string& text) {
  std::vector<int32_t> ids;
  if (tokenizer.add_bos() && tokenizer.bos() != tok::kNoToken) ids.push_back(tokenizer.bos());
  for (int32_t id : tokenizer.encode(text, /*add_special=*/false, /*parse_special=*/true))
    ids.push_back(id);
  return ids;
}

// Where a chat's last message starts in its prompt `ids`: the rendering of
// the messages before it, when its tokens begin the prompt's. The next
// conversation with the same system prompt, or this one with its last
// message edited, parts there (Job::checkpoint_hints); none when the
// template renders the earlier messages otherwise on their own.
std::vector<int64_t> last_message_start(const GenerationRequest& request, const ServedModel& model,
                                        const std::vector<int32_t>& ids) {
  if (request.endpoint != Endpoint::kChatCompletions || request.messages.size() < 2 ||
      !model.chat_template)
    return {};
  std::vector<tok::ChatMessage> earlier(request.messages.begin(), request.messages.end() - 1);
  std::vector<int32_t> prefix;
  try {
    prefix = text_ids(*model.tokenizer,
                      model.chat_template->apply(earlier, /*add_generation_prompt=*/false,
                                                 request.chat_template_kwargs));
  } catch (const Error&) {
    return {};
  }
  if (prefix.empty() || prefix.size() >= ids.size() ||
      !std::equal(prefix.begin(), prefix.end(), ids.begin()))
    return {};
  return {int64_t(prefix.size())};
}

// A chat request to a model that has no chat template (and none was given).
ApiError no_chat_template() {
  return make_api_error(501,
                        "This model has no chat template (tokenizer.chat_template): start the "
                        "server with --chat-template NAME|FILE, or use /v1/completions.",
                        "messages", "no_chat_template");
}

// The prompt of a request as token ids, or the 400 that says why not.
std::variant<std::vector<int32_t>, ApiError> prompt_ids(const GenerationRequest& request,
                                                        const ServedModel& model) {
  const tok::Tokenizer& tokenizer = *model.tokenizer;
  const bool chat = request.endpoint == Endpoint::kChatCompletions;
  const char* param = chat ? "messages" : "prompt";
  std::vector<int32_t> ids;
  if (!chat && request.prompt_is_tokens) {
    ids = request.prompt_tokens;
  } else {
    if (chat && !model.chat_template) return no_chat_template();
    std::string text;
    try {
      text = chat ? model.chat_template->apply(request.messages, /*add_generation_prompt=*/true,
                                               request.chat_template_kwargs)
                  : request.prompt;
    } catch (const Error& e) {
      return make_api_error(400,
                            str("The chat template (", model.chat_template->name(),
                                ") cannot render these messages: ", e.what()),
                            param);
    }
    ids = text_ids(tokenizer, text);
  }
  // At least one token must fit after the prompt.
  using Problem = runtime::PromptVerdict::Problem;
  const runtime::PromptVerdict verdict = runtime::check_prompt(ids, {.n_vocab = tokenizer.n_vocab(),
                                                                     .context = model.context,
                                                                     .windowed = model.windowed,
                                                                     .room_after = 1});
  if (verdict.problem == Problem::kEmpty) return make_api_error(400, "The prompt is empty.", param);
  if (verdict.problem == Problem::kOutsideVocabulary)
    return make_api_error(
        400,
        str("Invalid token in 'prompt' at index ", verdict.index, ": ", ids[verdict.index],
            " is outside the vocabulary of ", tokenizer.n_vocab(), " tokens."),
        param);
  if (verdict.problem == Problem::kTooLong)
    return make_api_error(
        400,
        str("This model's maximum context length is ", model.context, " tokens. However, your ",
            chat ? "messages" : "prompt", " resulted in ", ids.size(),
            " tokens, which leaves no room for the completion. Please reduce "
            "the length of the ",
            param, "."),
        param, "context_length_exceeded");
  return ids;
}

// The scheduler's job for a request whose prompt is `ids`.
Job make_job(const GenerationRequest& request, const ServedModel& model, std::vector<int32_t> ids) {
  Job job;
  const int64_t room = model.windowed ? -1 : model.context - int64_t(ids.size());
  job.checkpoint_hints = last_message_start(request, model, ids);
  job.prompt = std::move(ids);
  job.sampling = sampler_config(request, random_u64());
  // max_tokens capped by the room the context leaves; left out: the room.
  // A window policy has no such limit (the sequence may run past the
  // context), so a request that sets none gets one context's worth rather
  // than a reply that may never end.
  if (request.max_tokens) {
    job.max_tokens = *request.max_tokens;
    if (room >= 0 && job.max_tokens > room) job.max_tokens = room;
  } else {
    job.max_tokens = room >= 0 ? room : model.context;
  }
  if (request.endpoint == Endpoint::kChatCompletions && model.chat_template) {
    // The template's end-of-turn markers end the reply, as in `turbokv chat`.
    job.stops = model.chat_template->stop_strings();
    job.stop_tokens = model.chat_template->stop_tokens(*model.tokenizer);
  }
  for (const std::string& s : request.stop) job.stops.push_back(s);
  job.top_logprobs = request.logprobs ? request.top_logprobs : -1;
  return job;
}

FinishReason api_finish(JobFinish finish) {
  return finish == JobFinish::kStop ? FinishReason::kStop : FinishReason::kLength;
}

// One response's state, shared by the handler and its content provider
// (which httplib runs after the handler returned, on the same thread).
class Exchange {
 public:
  Exchange(GenerationRoutes& routes, const GenerationRequest& request,
           std::shared_ptr<JobStream> stream, ResponseMeta meta, int64_t prompt_bytes)
      : in_flight_(routes),
        routes_(routes),
        stream_(std::move(stream)),
        meta_(std::move(meta)),
        chat_(request.endpoint == Endpoint::kChatCompletions),
        logprobs_(request.logprobs),
        include_usage_(request.include_usage),
        prompt_bytes_(prompt_bytes),
        last_event_(Clock::now()) {}

  // The client is gone before the job ended: stop it.
  ~Exchange() {
    if (!done_) stream_->cancel();
  }

  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  bool done() const { return done_; }

  // Waits for the next event (up to kPollInterval); false on timeout.
  bool poll() {
    std::optional<Event> event = stream_->next(kPollInterval);
    if (!event) return false;
    take(std::move(*event));
    return true;
  }

  // ---- streamed (server-sent events) ----

  // One call of the chunked content provider: sends what the job produced
  // since the last call. false ends the response (client gone: the job is
  // cancelled by the destructor).
  bool pump_stream(httplib::DataSink& sink) {
    if (!sent_role_ && chat_) {
      StreamPiece role;
      role.first = true;
      sent_role_ = true;
      if (!write(sink, sse_event(chat_chunk_json(meta_, role, include_usage_)))) return false;
    }
    if (!done_ && !poll()) return client_there(sink, kStreamProbe);  // nothing new yet
    if (!connection_checked_recently() && !client_there(sink, kStreamProbe)) return false;
    if (!pending_text_.empty() || !pending_logprobs_.empty() || done_) {
      StreamPiece piece;
      piece.text = std::move(pending_text_);
      piece.logprobs_requested = logprobs_;
      piece.logprobs = std::move(pending_logprobs_);
      piece.text_offset_start = prompt_bytes_ + text_sent_;
      pending_text_.clear();
      pending_logprobs_.clear();
      text_sent_ += int64_t(piece.text.size());
      if (done_ && !failed()) piece.finish_reason = api_finish(done_event_.finish);
      if (!piece.text.empty() || !piece.logprobs.empty() ||
          piece.finish_reason != FinishReason::kNone) {
        const Json chunk = chat_ ? chat_chunk_json(meta_, piece, include_usage_)
                                 : completion_chunk_json(meta_, piece, include_usage_);
        if (!write(sink, sse_event(chunk))) return false;
      }
    }
    if (!done_) return true;
    if (failed()) {
      // The status line is long gone: the error goes in the stream, as
      // OpenAI sends errors that happen mid-stream.
      if (!write(sink, sse_event(error_json(job_error())))) return false;
    } else if (include_usage_) {
      const Json chunk = chat_ ? chat_usage_chunk_json(meta_, usage())
                               : completion_usage_chunk_json(meta_, usage());
      if (!write(sink, sse_event(chunk))) return false;
    }
    if (!write(sink, std::string(sse_done()))) return false;
    sink.done();
    return true;
  }

  // ---- whole body ----

  // The body (or error) once the job is done.
  void respond_whole(httplib::Response& res) {
    if (failed()) return send_api_error(res, job_error());
    res.status = 200;
    res.set_content(to_json_text(whole_body()), "application/json");
  }

  // The content provider of a whole body whose job is still running: waits
  // for it (watching the connection), then writes the body at once.
  bool pump_whole(httplib::DataSink& sink) {
    while (!done_) {
      if ((!poll() || !connection_checked_recently()) && !client_there(sink, kWholeProbe))
        return false;
    }
    // The status (200) is already out: a job that failed now can only say so
    // in the body.
    const std::string body = to_json_text(failed() ? error_json(job_error()) : whole_body());
    if (!write(sink, body)) return false;
    sink.done();
    return true;
  }

  // The job stopped for a reason that is not the request's answer.
  bool failed() const {
    return done_ &&
           (done_event_.finish == JobFinish::kError || done_event_.finish == JobFinish::kCancelled);
  }

 private:
  // False at most every kPollInterval: then the caller looks at the
  // connection (events can keep coming for a client that is gone).
  // Whether the client is still there. One that closed its sending side
  // may have half-closed or left; a byte that changes nothing for the
  // client (whitespace before a JSON body, an empty comment line between
  // server-sent events) is written once to tell: a departed client's end
  // resets the connection, and the next check sees it.
  static constexpr const char* kWholeProbe = " ";
  static constexpr const char* kStreamProbe = ":\n";
  bool client_there(httplib::DataSink& sink, const char* probe) {
    if (!sink.is_writable()) return false;
    if (probed_ || !DeadlineServer::peer_input_ended()) return true;
    probed_ = true;
    return write(sink, probe);
  }

  bool connection_checked_recently() {
    const Clock::time_point now = Clock::now();
    if (now - last_check_ < kPollInterval) return true;
    last_check_ = now;
    return false;
  }

  void take(Event event) {
    if (event.kind == Event::Kind::kText) {
      pending_text_ += event.text;
      text_ += event.text;
      if (!event.tokens.empty()) {
        // Counted as they come, so that a request cancelled half-way counts
        // what it cost.
        routes_.metrics().add_generated_tokens(event.tokens.size());
        // Inter-token latency: the time since the previous tokens, spread
        // over the tokens this event brings.
        const Clock::time_point now = Clock::now();
        if (seen_tokens_) {
          const double gap = std::chrono::duration<double>(now - last_event_).count();
          for (size_t i = 0; i < event.tokens.size(); ++i)
            routes_.metrics().observe_per_token(gap / double(event.tokens.size()));
        }
        seen_tokens_ = true;
        last_event_ = now;
      }
      if (logprobs_)
        for (const GeneratedToken& t : event.tokens) {
          TokenLogprob entry = token_logprob(t);
          pending_logprobs_.push_back(entry);
          logprobs_all_.push_back(std::move(entry));
        }
      return;
    }
    done_ = true;
    done_event_ = std::move(event);
    record_metrics();
  }

  TokenLogprob token_logprob(const GeneratedToken& t) const {
    const tok::Tokenizer& tokenizer = *routes_.model().tokenizer;
    TokenLogprob entry;
    entry.token = tokenizer.token_to_piece(t.token, /*render_special=*/true);
    entry.logprob = t.logprob;
    for (const auto& alt : t.top)
      entry.top.push_back({tokenizer.token_to_piece(alt.token, true), alt.logprob});
    return entry;
  }

  void record_metrics() {
    const Event& e = done_event_;
    ServerMetrics& m = routes_.metrics();
    if (e.cached_tokens > 0) m.add_prefix_cache_hit(uint64_t(e.cached_tokens));
    m.observe_queue_wait(e.timings.queued_seconds);
    if (e.completion_tokens > 0) m.observe_ttft(e.timings.first_token_seconds);
  }

  Usage usage() const {
    Usage u;
    u.prompt_tokens = done_event_.prompt_tokens;
    u.completion_tokens = done_event_.completion_tokens;
    u.cached_tokens = done_event_.cached_tokens;
    return u;
  }

  ApiError job_error() const {
    const Event& e = done_event_;
    if (e.finish == JobFinish::kCancelled)
      return make_api_error(503, "The server is shutting down; the request was cancelled.");
    if (e.budget_error)
      return make_api_error(400,
                            str("The request does not fit the server's KV cache budget: ", e.error),
                            "", "kv_budget_exceeded");
    return make_api_error(500, str("The generation failed: ", e.error));
  }

  Json whole_body() const {
    CompletionChoice choice;
    choice.text = text_;
    choice.finish_reason = api_finish(done_event_.finish);
    choice.logprobs_requested = logprobs_;
    choice.logprobs = logprobs_all_;
    return chat_ ? chat_completion_json(meta_, choice, usage())
                 : text_completion_json(meta_, choice, usage(), prompt_bytes_);
  }

  static bool write(httplib::DataSink& sink, const std::string& data) {
    return sink.write(data.data(), data.size());
  }

  GenerationRoutes::InFlight in_flight_;
  GenerationRoutes& routes_;
  std::shared_ptr<JobStream> stream_;
  ResponseMeta meta_;
  bool chat_, logprobs_, include_usage_;
  bool probed_ = false;  // client_there() wrote its probe
  int64_t prompt_bytes_;

  bool sent_role_ = false;
  bool done_ = false;
  Event done_event_;
  std::string text_;          // the whole reply so far
  std::string pending_text_;  // not yet streamed
  int64_t text_sent_ = 0;
  std::vector<TokenLogprob> pending_logprobs_, logprobs_all_;
  bool seen_tokens_ = false;
  Clock::time_point last_event_;
  Clock::time_point last_check_ = Clock::now();
};

}  // namespace

void send_api_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  res.set_content(to_json_text(error_json(error)), "application/json");
}

void send_unavailable(httplib::Response& res, const std::string& message) {
  send_api_error(res, make_api_error(503, message));
  res.set_header("Retry-After", "1");  // seconds
}

GenerationRoutes::GenerationRoutes(const ServedModel& model, Scheduler& scheduler,
                                   ServerMetrics& metrics)
    : model_(model), scheduler_(scheduler), metrics_(metrics), next_id_(random_u64()) {}

GenerationRoutes::InFlight::InFlight(GenerationRoutes& routes) : routes_(routes) {
  std::lock_guard<std::mutex> lock(routes_.mu_);
  ++routes_.in_flight_;
}

GenerationRoutes::InFlight::~InFlight() {
  std::lock_guard<std::mutex> lock(routes_.mu_);
  if (--routes_.in_flight_ == 0) routes_.idle_cv_.notify_all();
}

bool GenerationRoutes::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [&] { return in_flight_ == 0; });
}

void GenerationRoutes::handle(Endpoint endpoint, const std::string& body, httplib::Response& res,
                              bool close_delimited) {
  if (draining_.load()) return send_unavailable(res, "The server is shutting down.");
  std::variant<GenerationRequest, ApiError> parsed = endpoint == Endpoint::kChatCompletions
                                                         ? parse_chat_request(body)
                                                         : parse_completion_request(body);
  if (const ApiError* error = std::get_if<ApiError>(&parsed)) return send_api_error(res, *error);
  const GenerationRequest& request = std::get<GenerationRequest>(parsed);

  std::variant<std::vector<int32_t>, ApiError> ids = prompt_ids(request, model_);
  if (const ApiError* error = std::get_if<ApiError>(&ids)) return send_api_error(res, *error);

  std::shared_ptr<JobStream> stream;
  const size_t prompt_tokens = std::get<0>(ids).size();
  try {
    stream = scheduler_.submit(make_job(request, model_, std::move(std::get<0>(ids))));
  } catch (const QueueFull& e) {
    return send_unavailable(res, str("The server is busy (", e.what(), "); retry later."));
  } catch (const NotAccepting&) {
    return send_unavailable(res, "The server is shutting down.");
  } catch (const Error& e) {
    return send_api_error(res, make_api_error(400, e.what()));
  }

  metrics_.add_prompt_tokens(prompt_tokens);

  ResponseMeta meta;
  meta.id = response_id(endpoint, next_id_.fetch_add(1));
  meta.model = model_.id;
  meta.created = int64_t(std::time(nullptr));
  const int64_t prompt_bytes =
      request.endpoint == Endpoint::kCompletions && !request.prompt_is_tokens
          ? int64_t(request.prompt.size())
          : 0;
  auto exchange =
      std::make_shared<Exchange>(*this, request, std::move(stream), std::move(meta), prompt_bytes);

  if (request.stream) {
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    provide(res, close_delimited, "text/event-stream",
            [exchange](size_t, httplib::DataSink& sink) { return exchange->pump_stream(sink); });
    return;
  }
  // A whole body: wait here until the first event, so that a job that ends
  // at once (an error, a finished short reply) still gets its own status.
  // The wait for the rest watches the connection in a content provider.
  while (!exchange->poll()) {
  }
  if (exchange->done()) return exchange->respond_whole(res);
  res.status = 200;
  provide(res, close_delimited, "application/json",
          [exchange](size_t, httplib::DataSink& sink) { return exchange->pump_whole(sink); });
}

void GenerationRoutes::apply_template(const std::string& body, httplib::Response& res) {
  if (draining_.load()) return send_unavailable(res, "The server is shutting down.");
  std::variant<GenerationRequest, ApiError> parsed = parse_chat_request(body);
  if (const ApiError* error = std::get_if<ApiError>(&parsed)) return send_api_error(res, *error);
  const GenerationRequest& request = std::get<GenerationRequest>(parsed);
  if (!model_.chat_template) return send_api_error(res, no_chat_template());
  nlohmann::ordered_json vars = request.chat_template_kwargs;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (const tok::ChatMessage& m : request.messages)
    messages.push_back({{"role", m.role}, {"content", m.content}});
  vars["messages"] = std::move(messages);
  if (!vars.contains("add_generation_prompt")) vars["add_generation_prompt"] = true;
  std::string prompt;
  try {
    prompt = model_.chat_template->render(vars);
  } catch (const Error& e) {
    return send_api_error(res,
                          make_api_error(400,
                                         str("The chat template (", model_.chat_template->name(),
                                             ") cannot render these messages: ", e.what()),
                                         "messages"));
  }
  res.status = 200;
  res.set_content(nlohmann::ordered_json{{"prompt", prompt}}.dump(
                      -1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

}  // namespace tkv::server
