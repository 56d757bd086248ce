#include "bench/agree.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>

#include "bench/options.h"
#include "bench/report.h"
#include "bench/serve_client.h"
#include "cli/flags.h"
#include "common/error.h"
#include "common/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tkv::bench {

namespace {

constexpr const char* kDefaultPrompt =
    "The old lighthouse keeper climbed the stairs every evening and looked out over the sea";

struct AgreeOptions {
  std::string model, llama_bin, llama_args, prompt = kDefaultPrompt, out_dir;
  int n_predict = 64;
  int threads = 0;
  float margin = -1.0f;  // < 0: 0.02 for float weights, 0.05 for quantized
};

// A TCP port nobody listens on now (the kernel's pick), for llama-server.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) fail("bench agree: socket: ", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  if (!ok) fail("bench agree: cannot find a free port: ", std::strerror(errno));
  return ntohs(a.sin_port);
}

// llama-server on the model, asked for one greedy token at a time.
class LlamaServer {
 public:
  LlamaServer(const AgreeOptions& o, int ctx) : port_(free_port()) {
    const std::string bin = (std::filesystem::path(o.llama_bin) / "llama-server").string();
    if (::access(bin.c_str(), X_OK) != 0)
      fail("bench agree: --llama-bin: no executable llama-server in ", o.llama_bin);
    std::vector<std::string> argv = {bin, "-m", o.model, "--host", "127.0.0.1", "--port",
                                     std::to_string(port_), "-t", std::to_string(o.threads), "-c",
                                     std::to_string(ctx), "-np", "1",
                                     // Its CPU flash attention sums V in f16,
                                     // an error that grows with depth and
                                     // flips clear steps after ~60 tokens;
                                     // the plain path keeps f32 sums.
                                     "-fa", "off"};
    for (const std::string& a : split_words(o.llama_args)) argv.push_back(a);
    proc_ = std::make_unique<ServerProcess>(argv, 600.0, port_);
  }

  // The greedy token after `tokens` and its top-2 margin into s; false when
  // llama-server cannot say. One token per request, the growing sequence
  // as the prompt (llama-server keeps its cache and evaluates only the new
  // token). Its output parser rejects a reply whose text is a stray piece
  // of a UTF-8 character (an error 500), and it holds back the
  // probabilities of a token that starts one: random weights produce both.
  bool next(const std::vector<int32_t>& tokens, AgreeStep& s) {
    const Json body = {{"prompt", tokens},      {"n_predict", 1},
                       {"n_probs", 2},          {"temperature", 0.0},
                       {"ignore_eos", true},    {"cache_prompt", true},
                       {"return_tokens", true}, {"post_sampling_probs", false}};
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(std::chrono::seconds(600));
    const auto r = client.Post("/completion", body.dump(), "application/json");
    if (r && r->status == 500 && r->body.find("does not match the expected") != std::string::npos)
      return false;
    if (!r || r->status != 200)
      fail("bench agree: llama-server /completion failed: ",
           r ? std::to_string(r->status) + " " + r->body.substr(0, 200) : "no answer");
    const Json reply = Json::parse(r->body);
    const Json& ids = reply.at("tokens");
    if (ids.empty()) return false;
    s.llama_token = ids[0].get<int>();
    if (!reply.contains("completion_probabilities")) return true;  // no margin: not clear
    const Json& top = reply["completion_probabilities"].at(0).at("top_logprobs");
    if (top.size() < 2) return true;
    s.llama_second = top[1].at("id").get<int>();
    s.llama_margin = top[0].at("logprob").get<double>() - top[1].at("logprob").get<double>();
    return true;
  }

 private:
  int port_;
  std::unique_ptr<ServerProcess> proc_;
};

// turbokv's greedy token and top-2 margin from its logits.
void turbokv_choice(std::span<const float> logits, AgreeStep& s) {
  const auto best = std::max_element(logits.begin(), logits.end());
  float second = -INFINITY;
  for (auto it = logits.begin(); it != logits.end(); ++it)
    if (it != best) second = std::max(second, *it);
  s.turbokv_token = int(best - logits.begin());
  s.turbokv_margin = double(*best) - double(second);
}

// Both engines step by step over the same sequence: the prompt, then at
// each step llama.cpp's greedy token (turbokv's where llama-server cannot
// say), turbokv decoding one token at a time as in generation.
std::vector<AgreeStep> run_steps(const AgreeOptions& o, const model::Model& m,
                                 const std::vector<int32_t>& prompt) {
  const int ctx = int(prompt.size()) + o.n_predict + 16;
  LlamaServer llama(o, ctx);
  kv::KvCache cache(m.kv_shape(ctx), kv::KvConfig{});
  ThreadPool pool(o.threads);
  std::vector<int32_t> tokens = prompt;
  std::vector<float> logits = m.eval_last(cache, prompt, pool);
  std::vector<AgreeStep> steps;
  for (int i = 0; i < o.n_predict; ++i) {
    AgreeStep s;
    turbokv_choice(logits, s);
    s.llama_known = llama.next(tokens, s);
    const int32_t next = s.llama_known ? s.llama_token : s.turbokv_token;
    steps.push_back(s);
    tokens.push_back(next);
    logits = m.eval_last(cache, std::span<const int32_t>(&next, 1), pool);
  }
  return steps;
}

std::string agree_markdown(const Json& section) {
  char line[256];
  std::string md;
  const Json& sum = section["summary"];
  std::snprintf(line, sizeof line,
                "- steps: %d; clear (llama.cpp's top-2 margin >= %.3g): %d; turbokv's greedy token "
                "equal on %d of them\n",
                sum["steps"].get<int>(), sum["margin"].get<double>(), sum["clear"].get<int>(),
                sum["agree"].get<int>());
  md += line;
  md += "- weights: " + section["weights"].get<std::string>() + "\n\n";
  md +=
      "| step | llama.cpp token | margin | turbokv token | margin | |\n|---|---|---|---|---|---|\n";
  for (const Json& s : section["steps"]) {
    std::snprintf(line, sizeof line, "| %d | %d | %.4f | %d | %.4f | %s |\n", s["step"].get<int>(),
                  s["llama_token"].get<int>(), s["llama_margin"].get<double>(),
                  s["turbokv_token"].get<int>(), s["turbokv_margin"].get<double>(),
                  !s["llama_known"].get<bool>() ? "llama.cpp: no token"
                  : !s["clear"].get<bool>()     ? "near tie"
                  : s["llama_token"].get<int>() == s["turbokv_token"].get<int>() ? ""
                                                                                 : "**differs**");
    md += line;
  }
  return md;
}

bool float_weights(const model::Model& m) {
  for (const model::LayerWeights& L : m.weights().layers)
    for (const WeightMatrix* w : L.matrices())
      if (w->type != DType::F32 && w->type != DType::F16 && w->type != DType::BF16) return false;
  return true;
}

}  // namespace

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

Json agree_summary(const std::vector<AgreeStep>& steps, double margin) {
  int clear = 0, agree = 0;
  Json rows = Json::array();
  for (size_t i = 0; i < steps.size(); ++i) {
    const AgreeStep& s = steps[i];
    clear += s.clear ? 1 : 0;
    agree += s.clear && s.turbokv_token == s.llama_token ? 1 : 0;
    rows.push_back({{"step", int(i)},
                    {"llama_token", s.llama_token},
                    {"llama_second", s.llama_second},
                    {"llama_margin", s.llama_margin},
                    {"turbokv_token", s.turbokv_token},
                    {"turbokv_margin", s.turbokv_margin},
                    {"llama_known", s.llama_known},
                    {"clear", s.clear}});
  }
  return {{"summary",
           {{"steps", int(steps.size())}, {"margin", margin}, {"clear", clear}, {"agree", agree}}},
          {"steps", rows}};
}

std::string agree_section_markdown(const Json& section) {
  return agree_markdown(section);
}

int agree_main(const std::vector<std::string>& args) {
  AgreeOptions o;
  cli::FlagParser flags(
      "bench agree", "turbokv bench agree -m MODEL --llama-bin DIR [flags]",
      "Teacher-forced greedy agreement with llama.cpp: llama-server generates greedily\n"
      "from the prompt with its top-2 per step; turbokv evaluates the same tokens and\n"
      "picks its own greedy token at each step. Steps where llama.cpp's top-2 logit\n"
      "margin is under --margin are near ties and do not count. Exits 1 when a clear\n"
      "step differs.");
  flags.add_string({"-m", "--model"}, "PATH", "GGUF model file (both engines load it)", &o.model);
  flags.add_string({"--llama-bin"}, "DIR", "llama.cpp's build/bin (llama-server)", &o.llama_bin);
  flags.add_string({"--llama-args"}, "ARGS",
                   "more llama-server arguments, space-separated (e.g. --no-repack where its\n"
                   "AMX repack crashes)",
                   &o.llama_args);
  flags.add_string({"-p", "--prompt"}, "TEXT", "prompt (default: a fixed English sentence)",
                   &o.prompt);
  flags.add_int({"-n", "--n-predict"}, "N", "steps to compare (default 64)", &o.n_predict, 1, 4096);
  flags.add_float({"--margin"}, "X",
                  "top-2 logit margin below which a step is a near tie (default 0.02 for\n"
                  "F32/F16/BF16 weights, 0.05 for quantized)",
                  &o.margin, 0.0, 100.0);
  flags.add_int({"-t", "--threads"}, "N", "threads of each engine (default: physical cores)",
                &o.threads, 1, 1024);
  flags.add_string({"--out"}, "DIR", "write report.json and report.md there", &o.out_dir);
  if (!flags.parse(args)) return 0;
  if (o.model.empty()) fail("bench agree: -m MODEL is required");
  if (o.llama_bin.empty()) fail("bench agree: --llama-bin DIR is required");
  if (o.threads == 0) o.threads = physical_core_count();

  const auto m = model::Model::load(o.model);
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_gguf(m->gguf());
  const std::vector<int32_t> prompt = tokenizer.encode(o.prompt, true, false);
  if (prompt.empty()) fail("bench agree: the prompt has no tokens");
  const bool floats = float_weights(*m);
  const double margin = o.margin >= 0.0f ? double(o.margin) : floats ? 0.02 : 0.05;

  std::vector<AgreeStep> steps = run_steps(o, *m, prompt);
  for (AgreeStep& s : steps) s.clear = s.llama_known && s.llama_margin >= margin;
  Json section = agree_summary(steps, margin);
  section["weights"] = floats ? "float" : "quantized";
  const Json& sum = section["summary"];
  std::printf("agree: %s: %d steps, %d clear (margin >= %.3g), %d equal\n", o.model.c_str(),
              sum["steps"].get<int>(), sum["clear"].get<int>(), margin, sum["agree"].get<int>());
  for (const Json& s : section["steps"])
    if (s["clear"].get<bool>() && s["llama_token"] != s["turbokv_token"])
      std::printf("agree: step %d differs: llama.cpp %d (margin %.4f), turbokv %d\n",
                  s["step"].get<int>(), s["llama_token"].get<int>(),
                  s["llama_margin"].get<double>(), s["turbokv_token"].get<int>());
  if (!o.out_dir.empty()) {
    ReportHeader h;
    h.command_line = {"turbokv", "bench", "agree"};
    h.command_line.insert(h.command_line.end(), args.begin(), args.end());
    h.threads = o.threads;
    h.model = to_json(model_info(*m, o.model));
    Json report = make_report(h);
    report["agree"] = section;
    std::printf("agree: %s\n", write_report(report, o.out_dir).c_str());
  }
  return sum["clear"].get<int>() == sum["agree"].get<int>() ? 0 : 1;
}

}  // namespace tkv::bench
