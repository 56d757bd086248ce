#include "run_report.h"

#include <cstdio>

#include "cli/common_flags.h"
#include "common/error.h"
#include "common/sys_info.h"
#include "output.h"
#include "tensor/matmul.h"

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

// A signed byte count: "-1.25 MiB" for what the parts overcount.
std::string signed_bytes(int64_t bytes) {
  if (bytes >= 0) return format_bytes(uint64_t(bytes));
  std::string s = format_bytes(uint64_t(-bytes));
  s.insert(s.begin(), '-');
  return s;
}

}  // namespace

int64_t MemoryFigures::other() const {
  const uint64_t parts =
      model_resident + kv + kv_scratch + activations + product_scratch + tokenizer + code + stacks;
  return int64_t(peak_rss) - int64_t(parts);
}

MemoryFigures measure_memory(const model::Model& model, const kv::KvStats& kv,
                             uint64_t tokenizer_bytes) {
  MemoryFigures m;
  const ResidentMemory os = resident_memory(model.gguf().mapping()->data());
  // After the smaps read, whose buffers count too.
  m.peak_rss = peak_rss_bytes();
  m.model_resident = os.region;
  m.kv = kv.persistent_bytes - kv.page_bytes_on_disk;
  m.kv_scratch = kv.peak_scratch_bytes;
  // Model::scratch_bytes() is its context's activations plus this thread's
  // product scratch; the buffers of both grow to the largest chunk and stay.
  m.product_scratch = activation_scratch_bytes();
  m.activations = model.scratch_bytes() - m.product_scratch;
  m.tokenizer = tokenizer_bytes;
  m.code = os.files;
  m.stacks = os.stacks;
  return m;
}

std::string describe_memory(const MemoryFigures& m) {
  return str("peak ", format_bytes(m.peak_rss), " = model file ", format_bytes(m.model_resident),
             " + KV ", format_bytes(m.kv), " + KV scratch ", format_bytes(m.kv_scratch),
             " + activations ", format_bytes(m.activations), " + product scratch ",
             format_bytes(m.product_scratch), " + tokenizer ", format_bytes(m.tokenizer),
             " + code and libraries ", format_bytes(m.code), " + thread stacks ",
             format_bytes(m.stacks), " + other ", signed_bytes(m.other()));
}

std::string run_summary(const runtime::Sequence& session, const sample::SamplerConfig& sampling,
                        int threads, const RunFigures& f) {
  const kv::KvStats kv = session.cache().stats();
  std::string s = str("prompt ", f.prompt_tokens, " tok (", f.cached_tokens, " cached)");
  s += str(" | prefill ", f.prefilled, " tok in ", secs(f.prefill_seconds), ", ",
           rate(f.prefilled, f.prefill_seconds));
  if (f.generated > 0) s += str(" | TTFT ", secs(f.time_to_first_token));
  s += str(" | decode ", f.decoded, " tok in ", secs(f.decode_seconds), ", ",
           rate(f.decoded, f.decode_seconds));
  s += str(" | generated ", f.generated, " (", runtime::stop_reason_name(f.stop), ")");
  // The peak the memory part accounts for, once taken (measure_memory).
  const uint64_t peak = f.memory.peak_rss ? f.memory.peak_rss : peak_rss_bytes();
  s += str(" | peak RSS ", format_bytes(peak));
  s += str(" | model ", format_bytes(session.model().weight_bytes()));
  const uint64_t active = session.model().weights().active_bytes;
  if (session.model().weights().expert_bytes > 0)
    s += str(" (", format_bytes(active), " read per token)");
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
  s += str(" | memory ", describe_memory(f.memory));
  return s;
}

void print_run_summary(const runtime::Sequence& session, const sample::SamplerConfig& sampling,
                       int threads, const RunFigures& figures) {
  end_stdout_line();
  std::fprintf(stderr, "%s\n", run_summary(session, sampling, threads, figures).c_str());
}

}  // namespace tkv::cli
