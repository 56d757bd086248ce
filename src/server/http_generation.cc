#include "server/http_generation.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/error.h"
#include "runtime/prompt_check.h"
#include "server/api_response.h"
#include "server/http_connection.h"
#include "server/http_exchange.h"
#include "server/reply_reading.h"

namespace tkv::server {
namespace {

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

// Whether text_ids starts with a BOS: when the vocabulary asks for one.
bool leading_bos(const tok::Tokenizer& tokenizer) {
  return tokenizer.add_bos() && tokenizer.bos() != tok::kNoToken;
}

// As `turbokv run` and `turbokv chat` do: BOS when the vocabulary asks for
// it, special-token text (template markers) as their tokens.
std::vector<int32_t> text_ids(const tok::Tokenizer& tokenizer, const std::string& text) {
  std::vector<int32_t> ids;
  if (leading_bos(tokenizer)) ids.push_back(tokenizer.bos());
  for (int32_t id : tokenizer.encode(text, /*add_special=*/false, /*parse_special=*/true))
    ids.push_back(id);
  return ids;
}

// Where a chat's prompt `ids` is likely to part from the next requests'
// (Job::checkpoint_hints):
//   - where its last message starts: the rendering of the messages before
//     it, when its tokens begin the prompt's. The next conversation with
//     the same system prompt, or this one with its last message edited,
//     parts there. A template that renders the earlier messages otherwise
//     on their own (or refuses them: a system prompt without a user turn)
//     gives instead where the prompt parts from the same conversation with
//     another last message;
//   - where its generation prompt starts (the messages rendered without
//     it): the next turn renders the reply there, often otherwise than the
//     generation prompt began it (a reasoning section opened, then closed in
//     the history).
std::vector<int64_t> checkpoint_hints(const GenerationRequest& request, const ServedModel& model,
                                      const std::vector<int32_t>& ids) {
  if (request.endpoint != Endpoint::kChatCompletions || !model.chat_template) return {};
  const nlohmann::ordered_json vars = template_variables(request);
  const tok::Tokenizer& tokenizer = *model.tokenizer;
  // The rendering's text_ids against ids: its BOS, then its text's tokens
  // (match_encoding: the shared start of a long conversation is walked, not
  // encoded again).
  const size_t bos = leading_bos(tokenizer) ? 1 : 0;
  const std::span<const int32_t> text_part = std::span(ids).subspan(std::min(bos, ids.size()));
  const auto match = [&](const std::vector<tok::ChatMessage>& messages, bool generation) {
    return tokenizer.match_encoding(text_part,
                                    model.chat_template->apply(messages, generation, vars), true);
  };
  // The length of the rendering's tokens where they begin ids and are
  // fewer, else 0.
  const auto begins = [&](const tok::Tokenizer::EncodingMatch& m) -> int64_t {
    return m.whole && m.common > 0 && m.common < text_part.size() ? int64_t(bos + m.common) : 0;
  };
  std::vector<int64_t> hints;
  const auto add = [&](int64_t at) {
    if (at > 0 && std::find(hints.begin(), hints.end(), at) == hints.end()) hints.push_back(at);
  };
  try {
    add(begins(match(request.messages, false)));
  } catch (const Error&) {
  }
  if (request.messages.size() < 2) return hints;
  try {
    const std::vector<tok::ChatMessage> earlier(request.messages.begin(),
                                                request.messages.end() - 1);
    if (const int64_t at = begins(match(earlier, false)); at > 0) {
      add(at);
      return hints;
    }
  } catch (const Error&) {
  }
  std::vector<tok::ChatMessage> other = request.messages;
  std::string& content = other.back().content;
  content = content.rfind('#', 0) == 0 ? "@" : "#";
  try {
    // Where the prompt parts from the same conversation with another last
    // message.
    if (const size_t at = match(other, true).common; at < text_part.size()) add(int64_t(bos + at));
  } catch (const Error&) {
  }
  return hints;
}

// The prompt of a request as token ids (completions: prompt `which` of
// its prompts), or the 400 (the 501 of a chat without a template) that
// says why not.
std::variant<std::vector<int32_t>, ApiError> prompt_ids(const GenerationRequest& request,
                                                        const ServedModel& model, size_t which,
                                                        std::string* chat_text = nullptr) {
  const tok::Tokenizer& tokenizer = *model.tokenizer;
  const bool chat = request.endpoint == Endpoint::kChatCompletions;
  const char* param = chat ? "messages" : "prompt";
  std::vector<int32_t> ids;
  if (!chat && request.prompts[which].is_tokens) {
    ids = request.prompts[which].tokens;
  } else {
    if (chat && !model.chat_template) return no_chat_template();
    std::string text;
    try {
      text = chat ? model.chat_template->apply(request.messages, /*add_generation_prompt=*/true,
                                               template_variables(request))
                  : request.prompts[which].text;
    } catch (const Error& e) {
      return make_api_error(400,
                            str("The chat template (", model.chat_template->name(),
                                ") cannot render these messages: ", e.what()),
                            param);
    }
    ids = text_ids(tokenizer, text);
    if (chat && chat_text) *chat_text = std::move(text);
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
  job.checkpoint_hints = checkpoint_hints(request, model, ids);
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
  job.choices = request.n;
  job.cache_prompt = request.cache_prompt;
  return job;
}

// A logit_bias naming a token outside the vocabulary is the request's
// fault (the sampler would fail it mid-way).
std::optional<ApiError> check_logit_bias(const GenerationRequest& request, int32_t n_vocab) {
  for (const auto& [id, bias] : request.logit_bias)
    if (id >= n_vocab)
      return make_api_error(400,
                            str("Invalid value for 'logit_bias': token ", id,
                                " is outside the vocabulary of ", n_vocab, " tokens."),
                            "logit_bias", "invalid_value");
  return std::nullopt;
}

// Gives each job the constraint of `grammar`: built once per choice, when
// the choice starts (each its own grammar state; the grammar and the trie
// shared). One is built here first so that a grammar the matcher refuses
// (too ambiguous) is the request's 400, not a failed job.
void add_constraints(const std::shared_ptr<const grammar::Grammar>& grammar,
                     const std::shared_ptr<const grammar::TokenTrie>& trie,
                     const tok::Tokenizer& tokenizer, std::vector<Job>& jobs) {
  for (Job& job : jobs) {
    output_constraint(grammar, trie, tokenizer, job.stop_tokens);
    job.constraint = [grammar, trie, tokenizer = &tokenizer, stops = job.stop_tokens] {
      return output_constraint(grammar, trie, *tokenizer, stops);
    };
  }
}

// A request's jobs, and how a chat request's replies are read.
struct PreparedJobs {
  std::vector<Job> jobs;
  ReplyReading reading;     // chat only
  std::string chat_prompt;  // chat: the rendered prompt
};

// Every prompt's job; choice seeds run on across them (choice index i
// samples with seed + i).
std::variant<PreparedJobs, ApiError> make_jobs(const GenerationRequest& request,
                                               const ServedModel& model, uint64_t seed) {
  if (std::optional<ApiError> e = check_logit_bias(request, model.tokenizer->n_vocab())) return *e;
  const bool chat = request.endpoint == Endpoint::kChatCompletions;
  const size_t prompts = chat ? 1 : request.prompts.size();
  PreparedJobs prepared;
  for (size_t i = 0; i < prompts; ++i) {
    std::variant<std::vector<int32_t>, ApiError> ids =
        prompt_ids(request, model, i, &prepared.chat_prompt);
    if (ApiError* error = std::get_if<ApiError>(&ids)) {
      if (prompts > 1 && error->param == "prompt") error->param = str("prompt[", i, "]");
      return *error;
    }
    Job job = make_job(request, model, std::move(std::get<0>(ids)));
    job.first_choice = int(i) * request.n;
    job.sampling.seed = seed + uint64_t(job.first_choice);
    prepared.jobs.push_back(std::move(job));
  }
  if (chat) {
    std::variant<ReplyReading, ApiError> reading =
        reply_reading(request, *model.chat_template, prepared.chat_prompt);
    if (ApiError* error = std::get_if<ApiError>(&reading)) return *error;
    prepared.reading = std::get<ReplyReading>(std::move(reading));
    for (Job& job : prepared.jobs)
      job.render_special = prepared.reading.syntax.needs_special_tokens;
  }
  return prepared;
}

}  // namespace

void send_api_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  res.set_content(to_json_text(error_json(error)), "application/json");
}

void send_unavailable(httplib::Response& res, const std::string& message) {
  send_api_error(res, make_api_error(503, message));
  res.set_header("Retry-After", "1");  // seconds
}

ApiError no_chat_template() {
  return make_api_error(501,
                        "This model has no chat template (tokenizer.chat_template): start the "
                        "server with --chat-template NAME|FILE, or use /v1/completions.",
                        "messages", "no_chat_template");
}

nlohmann::ordered_json template_variables(const GenerationRequest& request) {
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  // Under tool_choice "none" too (as llama-server renders them): a history
  // of calls reads against them, and an agent's final "none" turn keeps the
  // prompt of its earlier turns, so the prefix cache still serves it.
  if (!request.tools.empty()) vars["tools"] = request.tools;
  for (const auto& [k, v] : request.chat_template_kwargs.items()) vars[k] = v;
  if (!request.reasoning_effort.empty() && !vars.contains("reasoning_effort"))
    vars["reasoning_effort"] = request.reasoning_effort;
  return vars;
}

void warn_unread_effort(const GenerationRequest& request, const ServedModel& model,
                        const char* field, httplib::Response& res) {
  if (request.reasoning_effort.empty() || !model.chat_template ||
      model.chat_template->source().find("reasoning_effort") != std::string::npos)
    return;
  res.set_header(kWarningHeader,
                 str(field, " is ignored: the chat template does not read reasoning_effort"));
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
  warn_unread_effort(request, model_, "reasoning_effort", res);
  ResponseMeta meta;
  meta.id = response_id(endpoint, next_id());
  meta.model = model_.id;
  meta.created = int64_t(std::time(nullptr));
  serve(request, openai_format(endpoint, std::move(meta), request.logprobs, request.include_usage),
        res, close_delimited);
}

std::variant<int64_t, ApiError> GenerationRoutes::count_prompt_tokens(
    const GenerationRequest& request) const {
  std::variant<std::vector<int32_t>, ApiError> ids = prompt_ids(request, model_, 0);
  if (ApiError* error = std::get_if<ApiError>(&ids)) return *error;
  return int64_t(std::get<0>(ids).size());
}

void GenerationRoutes::send_error(httplib::Response& res, ReplyFormat& format,
                                  const ApiError& error) {
  res.status = error.status;
  res.set_content(to_json_text(format.error(error)), "application/json");
  if (error.status == 503) res.set_header("Retry-After", "1");  // seconds
}

void GenerationRoutes::serve(const GenerationRequest& request, std::unique_ptr<ReplyFormat> format,
                             httplib::Response& res, bool close_delimited) {
  if (draining_.load())
    return send_error(res, *format, make_api_error(503, "The server is shutting down."));
  std::variant<PreparedJobs, ApiError> made =
      make_jobs(request, model_, request.seed ? uint64_t(*request.seed) : random_u64());
  if (const ApiError* error = std::get_if<ApiError>(&made)) return send_error(res, *format, *error);
  PreparedJobs& prepared = std::get<PreparedJobs>(made);
  std::vector<Job>& jobs = prepared.jobs;
  if (!prepared.reading.warning.empty()) res.set_header(kWarningHeader, prepared.reading.warning);

  std::vector<int64_t> prompt_bytes;
  size_t prompt_tokens = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    prompt_tokens += jobs[i].prompt.size();
    const bool text = request.endpoint == Endpoint::kCompletions && !request.prompts[i].is_tokens;
    prompt_bytes.push_back(text ? int64_t(request.prompts[i].text.size()) : 0);
  }
  std::shared_ptr<JobStream> stream;
  try {
    if (request.grammar)
      add_constraints(request.grammar, tries_.get(*model_.tokenizer), *model_.tokenizer, jobs);
    else if (prepared.reading.grammar)
      add_constraints(prepared.reading.grammar,
                      tries_.get(*model_.tokenizer, prepared.reading.syntax.needs_special_tokens),
                      *model_.tokenizer, jobs);
    stream = scheduler_.submit(std::move(jobs));
  } catch (const QueueFull& e) {
    return send_error(
        res, *format,
        make_api_error(503, str("The server is busy (", e.what(), "); retry later.")));
  } catch (const NotAccepting&) {
    return send_error(res, *format, make_api_error(503, "The server is shutting down."));
  } catch (const Error& e) {
    return send_error(res, *format, make_api_error(400, e.what()));
  }
  metrics_.add_prompt_tokens(prompt_tokens);
  format->prepared(int64_t(prompt_tokens));

  ReplyParsing parsing;
  if (prepared.reading.active() && format->reads_reply_syntax()) {
    parsing.tools = prepared.reading.syntax.tools;
    parsing.make = [reading = prepared.reading, prompt = std::move(prepared.chat_prompt)] {
      return reading.parser(prompt);
    };
  }
  auto exchange = std::make_shared<Exchange>(*this, std::move(stream), std::move(format), request.n,
                                             prompt_bytes, std::move(parsing));
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

}  // namespace tkv::server
