// `turbokv chat`: an interactive conversation (the REPL around ChatSession).
//
// Lines come from stdin (a terminal or a pipe); each non-command line is a
// user message, and a line ending in '\' continues on the next one. Replies
// stream to stdout; status messages go to stderr. Ctrl-C while a reply is
// being generated stops the reply; Ctrl-C at the prompt, or the end of the
// input, ends the program.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli/common_flags.h"
#include "command_registry.h"
#include "common/error.h"
#include "common/sys_info.h"
#include "line_reader.h"
#include "model/model.h"
#include "output.h"
#include "prefill_progress.h"
#include "runtime/chat_session.h"

namespace tkv::cli {
namespace {

using runtime::ChatReply;
using runtime::ChatSession;
using runtime::Sequence;
using runtime::stop_reason_name;
using runtime::StopReason;

// Raised by SIGINT; lock-free, so safe to store from a signal handler.
std::atomic<bool> g_interrupt{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_sigint(int) {
  g_interrupt.store(true);
}

void install_sigint_handler() {
  struct sigaction sa = {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked read() returns EINTR
  sigaction(SIGINT, &sa, nullptr);
}

constexpr const char* kCommandHelp =
    "commands:\n"
    "  /clear        forget the conversation (keeps the system prompt)\n"
    "  /save FILE    save the conversation and its KV cache (one session file)\n"
    "  /load FILE    continue a saved conversation\n"
    "  /stats        context use, KV cache memory, speed of the last reply\n"
    "  /help         this list\n"
    "  /quit         leave (so do Ctrl-C at the prompt and end of input)\n"
    "a line ending in '\\' continues on the next line; Ctrl-C stops a reply.\n";

void out(const std::string& text) {
  write_stdout(text);
}

std::string rate(int64_t tokens, double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", seconds > 0 ? double(tokens) / seconds : 0.0);
  return buf;
}

std::string stats_text(ChatSession& chat, const ChatReply* last) {
  Sequence& s = chat.session();
  const kv::KvStats kv = s.cache().stats();
  std::string text = str("context: ", s.tokens().size(), " of ", s.context_size(), " tokens");
  if (s.cache().config().window > 0) text += str(" (window: ", kv.tokens_kept, " kept)");
  text += str(", ", chat.messages().size(), " messages\n");
  text += str("KV cache: ", format_bytes(kv.persistent_bytes), " persistent (",
              format_bytes(kv.page_bytes), " pages, ", format_bytes(kv.f16_bytes), " f16), ",
              format_bytes(kv.peak_scratch_bytes), " peak scratch; ", s.cache().config().describe(),
              "\n");
  text += str("memory: peak RSS ", format_bytes(peak_rss_bytes()), ", model ",
              format_bytes(s.model().weight_bytes()), "\n");
  if (last)
    text += str("last reply: prompt ", last->prompt_tokens, " tok at ",
                rate(last->prompt_tokens, last->prefill_seconds), " tok/s, ",
                last->generation.n_generated, " generated, decode ",
                rate(last->generation.n_decoded, last->generation.decode_seconds), " tok/s (",
                stop_reason_name(last->generation.reason), ")\n");
  return text;
}

constexpr const char* kContextAdvice =
    "use /clear to start over, or restart with a larger -c or --kv-window N";

// Maps the weights on a thread of its own while the user types the first
// message (Model::fault_in_weights: mapped weights; a copy was read whole
// at load), so that the first reply does not pay the page faults (~0.6 s
// of a 2.5 GB model on a VM, more from a cold disk). Stopped and joined
// before the first reply's prefill, which would otherwise share the cores
// with it, and before the model goes.
class BackgroundFaultIn {
 public:
  explicit BackgroundFaultIn(const model::Model& m)
      : thread_([this, &m] { m.fault_in_weights(&stop_); }) {}
  ~BackgroundFaultIn() {
    stop_.store(true, std::memory_order_relaxed);
    thread_.join();
  }
  BackgroundFaultIn(const BackgroundFaultIn&) = delete;
  BackgroundFaultIn& operator=(const BackgroundFaultIn&) = delete;

 private:
  std::atomic<bool> stop_{false};  // before thread_: set up before the thread starts
  std::thread thread_;
};

// Runs one slash command; false for /quit.
bool handle_command(const std::string& line, ChatSession& chat, const ChatReply* last) {
  const size_t space = line.find(' ');
  const std::string cmd = line.substr(0, space);
  std::string arg = space == std::string::npos ? "" : line.substr(space + 1);
  while (!arg.empty() && arg.back() == ' ') arg.pop_back();
  while (!arg.empty() && arg.front() == ' ') arg.erase(0, 1);
  if (cmd == "/quit" || cmd == "/exit") return false;
  if (cmd == "/help") {
    out(kCommandHelp);
  } else if (cmd == "/clear") {
    chat.clear();
    std::fprintf(stderr, "turbokv: conversation cleared\n");
  } else if (cmd == "/stats") {
    out(stats_text(chat, last));
  } else if (cmd == "/save" || cmd == "/load") {
    if (arg.empty()) fail(cmd, " needs a file name, e.g. ", cmd, " chat.session");
    if (cmd == "/save") {
      chat.save(arg);  // checks both paths before any work
      std::fprintf(stderr, "turbokv: saved %zu tokens, %zu messages to %s\n",
                   chat.session().tokens().size(), chat.messages().size(), arg.c_str());
    } else {
      const std::string warning = chat.load(arg);
      std::fprintf(stderr, "turbokv: loaded %zu tokens, %zu messages from %s\n",
                   chat.session().tokens().size(), chat.messages().size(), arg.c_str());
      if (!warning.empty()) std::fprintf(stderr, "turbokv: warning: %s\n", warning.c_str());
    }
  } else {
    fail("unknown command ", cmd, " (/help lists them)");
  }
  return true;
}

struct ChatFlags {
  ModelFlags model_flags;
  ThreadFlags thread_flags;
  ContextFlags context_flags;
  KvFlags kv_flags;
  SamplingFlags sampling_flags;
  ProgressFlags progress_flags;
  std::string system_prompt, template_name;
  std::vector<std::string> stops;
  int n_predict = -1;
  bool verbose = false;
};

// chat's flags, declared on `flags` into `f`.
void declare_flags(FlagParser& flags, ChatFlags& f) {
  f.model_flags.add_to(flags);
  flags.section("conversation");
  flags.add_string({"--system", "-sys", "--system-prompt"}, "TEXT", "system prompt",
                   &f.system_prompt);
  flags.add_string({"--chat-template"}, "NAME|FILE",
                   "override the model's chat template: a built-in (chatml, llama3, phi3,\n"
                   "gemma, mistral-v7, llama2) or a Jinja file (default: the model's own)",
                   &f.template_name);
  flags.add_strings({"--stop", "-r", "--reverse-prompt"}, "STR",
                    "end a reply at STR (repeatable; not shown)", &f.stops);
  flags.add_int({"-n", "--n-predict"}, "N",
                "at most N tokens per reply; -1 = until end of turn (default -1)", &f.n_predict,
                -1);
  flags.add_bool({"--verbose"}, "print settings and per-reply speed on stderr", &f.verbose);
  f.progress_flags.add_to(flags);
  flags.section("compute");
  f.thread_flags.add_to(flags);
  f.context_flags.add_to(flags);
  f.kv_flags.add_to(flags);
  f.sampling_flags.add_to(flags);
}

// The conversation: reads messages (a line; a trailing \\ continues it) and
// commands from standard input until end of input or /quit.
void converse(ChatSession& chat, const model::Model& model, int n_predict, bool verbose) {
  Sequence& session = chat.session();
  install_sigint_handler();
  const bool interactive = ::isatty(0) == 1;
  // Typed input leaves the weights time to map; piped input starts at once.
  std::optional<BackgroundFaultIn> fault_in;
  if (interactive) fault_in.emplace(model);
  LineReader reader(0, &g_interrupt);
  ChatReply last;
  bool have_last = false;
  while (true) {
    if (interactive) out("> ");
    std::string line, more;
    LineReader::Status status = reader.read_line(line);
    while (status == LineReader::Status::kLine && !line.empty() && line.back() == '\\') {
      line.back() = '\n';
      if (interactive) out(". ");
      status = reader.read_line(more);
      if (status == LineReader::Status::kLine) line += more;
    }
    if (status != LineReader::Status::kLine) {
      if (interactive) out("\n");
      break;
    }
    if (line.empty()) continue;
    if (line[0] == '/') {
      try {
        if (!handle_command(line, chat, have_last ? &last : nullptr)) break;
      } catch (const StdoutError&) {
        throw;
      } catch (const std::exception& e) {
        // A failed command (/load of a missing file, /save to a full disk)
        // leaves the conversation as it was; the chat goes on.
        std::fprintf(stderr, "turbokv: error: %s\n", e.what());
      }
      continue;
    }
    g_interrupt.store(false);
    fault_in.reset();
    ChatReply reply = chat.respond(line, n_predict, &g_interrupt, out);
    if (reply.no_room) {
      // Nothing was fed or generated: /stats keeps showing the last reply.
      std::fprintf(
          stderr, "turbokv: context full (%zu of %lld tokens): this message does not fit; %s\n",
          session.tokens().size(), static_cast<long long>(session.context_size()), kContextAdvice);
      continue;
    }
    last = std::move(reply);
    have_last = true;
    out("\n");
    if (last.generation.reason == StopReason::kInterrupted) {
      std::fprintf(stderr, "turbokv: reply stopped (Ctrl-C)\n");
      g_interrupt.store(false);
    } else if (last.generation.reason == StopReason::kContextFull) {
      std::fprintf(stderr, "turbokv: context full (%lld tokens): reply cut; %s\n",
                   static_cast<long long>(session.context_size()), kContextAdvice);
    }
    if (verbose)
      std::fprintf(stderr,
                   "[prompt %lld tok in %.3f s, %lld generated, %lld fed back, decode %s tok/s, "
                   "%s]\n",
                   static_cast<long long>(last.prompt_tokens), last.prefill_seconds,
                   static_cast<long long>(last.generation.n_generated),
                   static_cast<long long>(last.generation.n_decoded),
                   rate(last.generation.n_decoded, last.generation.decode_seconds).c_str(),
                   stop_reason_name(last.generation.reason));
  }
}

int chat_main(std::span<const std::string> args) {
  ChatFlags f;
  FlagParser flags("chat", "turbokv chat -m MODEL [-sys TEXT] [flags]",
                   "An interactive conversation using the model's chat template. The KV cache\n"
                   "is kept across turns: each turn feeds only its new tokens. Type /help for\n"
                   "the commands (/clear /save /load /stats /quit).");
  declare_flags(flags, f);
  if (!flags.parse(args)) return 0;

  kv::KvConfig kv_config = f.kv_flags.config();
  const sample::SamplerConfig sampling = f.sampling_flags.config();
  const PrefillProgress progress = f.progress_flags.mode();
  for (const auto& stop : f.stops)
    if (stop.empty()) fail("--stop: the stop string is empty");
  // A bad --chat-template fails before the model is mapped.
  if (!f.template_name.empty()) (void)tok::ChatTemplate::from_option(f.template_name);
  const auto model = f.model_flags.load("chat");
  if (const std::string note = f.kv_flags.adapt_to(*model, kv_config); !note.empty())
    std::fprintf(stderr, "%s\n", note.c_str());
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_gguf(model->gguf());
  const tok::ChatTemplate chat_template =
      tok::ChatTemplate::for_tokenizer(tokenizer, f.template_name);

  Sequence session(*model, tokenizer, f.context_flags.context_for(*model), kv_config,
                   f.thread_flags.count(), f.context_flags.ubatch);
  session.set_prefill_observer(prefill_progress_bar(progress));
  ChatSession chat(session, chat_template, sampling, f.system_prompt, f.stops);
  std::fprintf(stderr,
               "turbokv chat: %s (weights %s), template %s, context %lld, kv %s, sampling %s\n",
               model->config().describe().c_str(), model->describe_weights().c_str(),
               chat_template.name().c_str(), static_cast<long long>(session.context_size()),
               kv_config.describe().c_str(), describe_sampling(sampling).c_str());
  std::fprintf(stderr, "type a message, /help for commands\n");

  converse(chat, *model, f.n_predict, f.verbose);
  return 0;
}

}  // namespace
}  // namespace tkv::cli

TKV_REGISTER_COMMAND(chat, "interactive multi-turn chat (KV cache reused across turns)",
                     tkv::cli::chat_main);
