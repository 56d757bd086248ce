#include "run_report.h"

#include <cstdio>

#include "cli/common_flags.h"
#include "common/error.h"
#include "common/sys_info.h"
#include "output.h"

namespace tkv::cli {

namespace {

std::string rate(int64_t tokens, double seconds) {
  if (tokens <= 0 || seconds <= 0) return "- tok/s";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f tok/s", double(tokens) / seconds);
  return buf;
}

std::string secs(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

}  // namespace

std::string run_summary(const runtime::Sequence& session,
                        const sample::SamplerConfig& sampling, int threads, const RunFigures& f) {
  const kv::KvStats kv = session.cache().stats();
  std::string s = str("prompt ", f.prompt_tokens, " tok (", f.cached_tokens, " cached)");
  s += str(" | prefill ", f.prefilled, " tok in ", secs(f.prefill_seconds), ", ",
           rate(f.prefilled, f.prefill_seconds));
  if (f.generated > 0) s += str(" | TTFT ", secs(f.time_to_first_token));
  s += str(" | decode ", f.decoded, " tok in ", secs(f.decode_seconds), ", ",
           rate(f.decoded, f.decode_seconds));
  s += str(" | generated ", f.generated, " (", runtime::stop_reason_name(f.stop), ")");
  s += str(" | peak RSS ", format_bytes(peak_rss_bytes()));
  s += str(" | model ", format_bytes(session.model().weight_bytes()));
  s += str(" | KV ", format_bytes(kv.persistent_bytes), " persistent, ",
           format_bytes(kv.peak_scratch_bytes), " peak scratch, ");
  // Under a window policy the cache holds the sinks and the newest tokens of
  // the longer sequence it consumed.
  if (session.cache().config().window > 0)
    s += str(kv.tokens_kept, " tokens held of ", kv.n_tokens, " consumed");
  else
    s += str(kv.n_tokens, " tokens");
  s += str(" | kv ", session.cache().config().describe());
  s += str(" | sampling ", describe_sampling(sampling));
  s += str(" | threads ", threads);
  return s;
}

void print_run_summary(const runtime::Sequence& session,
                       const sample::SamplerConfig& sampling, int threads,
                       const RunFigures& figures) {
  end_stdout_line();
  std::fprintf(stderr, "%s\n", run_summary(session, sampling, threads, figures).c_str());
}

}  // namespace tkv::cli
