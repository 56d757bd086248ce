// `turbokv run`: prefill a prompt, then sample and stream a continuation,
// ending with a one-line summary of speed and memory on stderr.
#include <unistd.h>

#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "cli/common_flags.h"
#include "command_registry.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "common/sys_info.h"
#include "common/timer.h"
#include "model/model.h"
#include "output.h"
#include "prefill_progress.h"
#include "run_report.h"
#include "runtime/generation.h"
#include "runtime/prompt_cache.h"
#include "runtime/prompt_check.h"
#include "runtime/session_state.h"
#include "tokenizer/stream_decoder.h"

namespace tkv::cli {
namespace {

using runtime::generate_text;
using runtime::GenerateOptions;
using runtime::GenerateResult;
using runtime::prompt_cache_needs_save;
using runtime::prompt_cache_point;
using runtime::PromptCacheUse;
using runtime::restore_prompt_cache;
using runtime::save_prompt_cache;
using runtime::Sequence;
using runtime::StopReason;

struct RunFlags {
  ModelFlags model;
  ThreadFlags threads;
  ContextFlags context;
  KvFlags kv;
  SamplingFlags sampling;
  ProgressFlags progress;
  std::string prompt, prompt_file, prompt_cache;
  std::vector<std::string> stops;
  int n_predict = -1;
  bool no_bos = false, ignore_eos = false, verbose = false, no_display_prompt = false;
};

// run's flags, declared on `flags` into `f`.
void declare_flags(FlagParser& flags, RunFlags& f) {
  f.model.add_to(flags);
  flags.section("generation");
  flags.add_string({"-p", "--prompt"}, "TEXT", "the prompt", &f.prompt);
  flags.add_string({"-f", "--file"}, "FILE", "read the prompt from FILE (- = standard input)",
                   &f.prompt_file);
  flags.add_int({"-n", "--n-predict"}, "N",
                "tokens to generate; -1 = until end of text or a full context (default -1)",
                &f.n_predict, -1);
  flags.add_bool({"--no-bos"}, "do not prepend BOS (default: as the vocabulary asks)", &f.no_bos);
  flags.add_bool({"--ignore-eos"}, "keep generating past end-of-text tokens", &f.ignore_eos);
  flags.add_bool({"--no-display-prompt"}, "do not echo the prompt", &f.no_display_prompt);
  flags.add_strings({"--stop", "-r", "--reverse-prompt"}, "STR",
                    "end the output at STR (repeatable; not shown)", &f.stops);
  flags.add_string({"--prompt-cache"}, "FILE",
                   "restore the prompt's KV cache from FILE when it matches, else save it there",
                   &f.prompt_cache);
  flags.add_bool({"--verbose"}, "print the model, KV and sampling settings first", &f.verbose);
  f.progress.add_to(flags);
  flags.section("compute");
  f.threads.add_to(flags);
  f.context.add_to(flags);
  f.kv.add_to(flags);
  f.sampling.add_to(flags);
}

// The prompt's token ids (BOS as the vocabulary asks, unless --no-bos),
// checked against the context (runtime/prompt_check.h).
std::vector<int32_t> prompt_ids(const tok::Tokenizer& tokenizer, const std::string& prompt,
                                bool no_bos, int ctx, bool windowed) {
  std::vector<int32_t> ids;
  if (!no_bos && tokenizer.add_bos() && tokenizer.bos() != tok::kNoToken)
    ids.push_back(tokenizer.bos());
  for (int32_t id : tokenizer.encode(prompt, /*add_special=*/false, /*parse_special=*/true))
    ids.push_back(id);
  using Problem = runtime::PromptVerdict::Problem;
  const runtime::PromptVerdict verdict = runtime::check_prompt(
      ids, {.n_vocab = tokenizer.n_vocab(), .context = ctx, .windowed = windowed});
  if (verdict.problem == Problem::kEmpty)
    fail("run: the prompt is empty and the vocabulary adds no BOS: nothing to start from");
  if (verdict.problem == Problem::kTooLong)
    fail("run: the prompt is ", ids.size(), " tokens, longer than the context of ", ctx,
         " tokens (raise -c, or use --kv-window)");
  if (verdict.problem == Problem::kOutsideVocabulary)
    fail("run: the tokenizer made token id ", ids[verdict.index], ", outside the vocabulary of ",
         tokenizer.n_vocab(), " tokens (a broken GGUF vocabulary)");

  return ids;
}

// Prefills `all` after the tokens restored from a prompt cache; with a
// prompt cache, the prompt up to the start of its last -ub chunk is saved
// between the two evals (see prompt_cache.h), the save not timed. Returns
// the seconds the evals took.
double prefill(Sequence& session, std::span<const int32_t> all, const std::string& prompt_cache,
               const PromptCacheUse& cache_use) {
  double prefill_seconds = 0;
  if (prompt_cache.empty()) {
    const Stopwatch t;
    session.feed(all);
    prefill_seconds = t.seconds();
  } else {
    const size_t from = size_t(cache_use.restored);
    const size_t point = size_t(prompt_cache_point(all.size(), session.ubatch()));
    const Stopwatch head;
    if (point > from) session.feed(all.subspan(from, point - from));
    prefill_seconds = head.seconds();
    if (prompt_cache_needs_save(cache_use, all.size(), session.ubatch()))
      save_prompt_cache(prompt_cache, session);
    const Stopwatch last;
    session.feed(all.subspan(std::max(point, from)));
    prefill_seconds += last.seconds();
  }
  return prefill_seconds;
}

// Generates and streams the reply to stdout; its figures go to `fig`.
void reply(Sequence& session, std::span<const int32_t> ids, const RunFlags& f,
           double prefill_seconds, RunFigures& fig) {
  GenerateOptions gen;
  gen.max_tokens = f.n_predict;
  gen.stop_at_eog = !f.ignore_eos;
  const runtime::TextGenerateResult text = generate_text(
      session, gen,
      {.stops = f.stops, .start = tok::StreamDecoder::Start::kTextStart, .spelled_after = ids},
      [](std::string_view piece) {
        write_stdout(piece);
        return true;
      });
  const GenerateResult& result = text.generation;
  if (result.n_generated > 0) write_stdout("\n");
  // Time to first token: prefill plus sampling the first token (the
  // prompt-cache save in between is not part of it).
  fig.time_to_first_token =
      result.n_generated > 0 ? prefill_seconds + result.first_token_seconds : 0;
  fig.generated = result.n_generated;
  fig.decoded = result.n_decoded;
  fig.decode_seconds = result.decode_seconds;
  fig.stop = result.reason;
}

int run_main(std::span<const std::string> args) {
  RunFlags f;
  FlagParser flags("run", "turbokv run -m MODEL (-p PROMPT | -f FILE) [-n N] [flags]",
                   "Prefills the prompt, then generates and streams a continuation. The prompt\n"
                   "is echoed first (its special tokens such as <|eot_id|> are parsed). A summary\n"
                   "line with speed and memory ends the run on stderr.");
  declare_flags(flags, f);
  if (!flags.parse(args)) return 0;

  // Validate everything the flags alone decide before the model is mapped.
  if (flags.was_set("-p") == !f.prompt_file.empty())
    fail("run: give exactly one of -p PROMPT or -f PROMPT_FILE");
  kv::KvConfig kv_config = f.kv.config();
  const sample::SamplerConfig sampler_config = f.sampling.config();
  const PrefillProgress progress = f.progress.mode();
  for (const auto& stop : f.stops)
    if (stop.empty()) fail("--stop: the stop string is empty");
  if (!f.prompt_cache.empty()) check_output_path(f.prompt_cache, "--prompt-cache");
  const std::string prompt = f.prompt_file.empty() ? f.prompt : read_input_file(f.prompt_file);

  const auto model = f.model.load("run");
  if (const std::string note = f.kv.adapt_to(*model, kv_config); !note.empty())
    std::fprintf(stderr, "%s\n", note.c_str());
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_gguf(model->gguf());
  const int ctx = f.context.context_for(*model);

  const std::vector<int32_t> ids =
      prompt_ids(tokenizer, prompt, f.no_bos, ctx, kv_config.window > 0);

  Sequence session(*model, tokenizer, ctx, kv_config, f.threads.count(), f.context.ubatch);
  session.set_prefill_observer(prefill_progress_bar(progress));
  session.set_sampler(sampler_config);
  if (f.verbose)
    std::fprintf(
        stderr,
        "model: %s (weights %s)\nkv: %s\nsampling: %s\nthreads: %d, context %d, ubatch %d\n",
        model->config().describe().c_str(), model->describe_weights().c_str(),
        kv_config.describe().c_str(), describe_sampling(sampler_config).c_str(), f.threads.count(),
        ctx, f.context.ubatch);

  // Echo the prompt before the (possibly long) prefill, unless prefill
  // progress may be drawn on the terminal: then after it, so that the bar
  // has a line of its own. The decoder sees the prompt ids either way, so
  // the continuation is spelled as it would be in the decoded whole.
  std::string echo;
  {
    tok::StreamDecoder decoder(tokenizer, tok::StreamDecoder::Start::kTextStart);
    for (int32_t id : ids) echo += decoder.push(id);
  }
  if (f.no_display_prompt) echo.clear();
  const bool echo_after_prefill = progress == PrefillProgress::kAlways ||
                                  (progress == PrefillProgress::kAuto && ::isatty(2) == 1);
  if (!echo_after_prefill) write_stdout(echo);

  RunFigures fig;
  fig.prompt_tokens = int64_t(ids.size());
  PromptCacheUse cache_use;
  if (!f.prompt_cache.empty()) {
    cache_use = restore_prompt_cache(f.prompt_cache, session, ids);
    if (!cache_use.note.empty())
      std::fprintf(stderr, "turbokv: prompt cache %s not used: %s\n", f.prompt_cache.c_str(),
                   cache_use.note.c_str());
    fig.cached_tokens = cache_use.restored;
  }
  const double prefill_seconds = prefill(session, ids, f.prompt_cache, cache_use);
  if (echo_after_prefill) write_stdout(echo);
  fig.prefill_seconds = prefill_seconds;
  fig.prefilled = int64_t(ids.size()) - cache_use.restored;
  for (int32_t id : ids) session.sampler().accept(id);  // the repetition penalty sees the prompt

  reply(session, ids, f, prefill_seconds, fig);

  end_stdout_line();  // after -n 0, the echoed prompt may end mid-line
  if (fig.stop == StopReason::kContextFull)
    std::fprintf(stderr,
                 "turbokv: context full (%lld tokens): stopped. Raise -c, or use --kv-window N "
                 "to keep only the newest tokens.\n",
                 static_cast<long long>(session.context_size()));
  fig.memory = measure_memory(*model, session.cache().stats(), tokenizer.memory_bytes());
  print_run_summary(session, sampler_config, f.threads.count(), fig);
  return 0;
}

}  // namespace
}  // namespace tkv::cli

TKV_REGISTER_COMMAND(run, "generate text from a prompt, streaming, with a speed/memory summary",
                     tkv::cli::run_main);
