#include "bench/qa.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "bench/cell_env.h"
#include "bench/recall_prompt.h"
#include "common/error.h"

namespace tkv::bench {

namespace {

std::string session_path() {
  static std::atomic<int> counter{0};
  return (std::filesystem::temp_directory_path() / ("turbokv-bench-" + std::to_string(::getpid()) +
                                                    "-" + std::to_string(counter++) + ".session"))
      .string();
}

bool answer_complete(const std::string& text) {
  const size_t d = text.find_first_of("0123456789");
  if (d != std::string::npos) {
    const size_t e = text.find_first_not_of("0123456789", d);
    if (e != std::string::npos) return true;
  }
  const size_t nl = text.find('\n');
  return nl != std::string::npos && text.find_first_not_of(" \n") < nl;
}

Answer greedy_answer(const model::Model& model, ThreadPool& pool, const tok::Tokenizer& tok,
                     kv::KvCache& cache, std::span<const int32_t> rest, const AskOptions& opts) {
  Answer a;
  std::vector<float> logits = model.eval_last(cache, rest, pool, opts.ubatch);
  a.prompt_tokens = cache.n_tokens();
  std::vector<int32_t> generated;
  for (int i = 0; i < opts.max_answer_tokens; ++i) {
    const int32_t next = argmax(logits);
    if (tok.is_eog(next)) break;
    generated.push_back(next);
    a.text = tok.decode(generated);
    if (answer_complete(a.text) || cache.n_tokens() >= cache.shape().max_tokens) break;
    logits = model.eval_last(cache, std::span<const int32_t>(&next, 1), pool, 1);
  }
  a.digits = first_digit_run(a.text);
  return a;
}

}  // namespace

std::vector<Answer> answer_prompts(const model::Model& model, ThreadPool& pool,
                                   const tok::Tokenizer& tok, kv::KvCache& cache,
                                   const std::vector<std::vector<int32_t>>& prompts,
                                   const AskOptions& opts) {
  if (prompts.empty()) return {};
  const size_t have = size_t(cache.n_tokens());
  size_t common = prompts[0].size();
  for (const auto& p : prompts) {
    if (p.size() < have ||
        !std::equal(p.begin(), p.begin() + std::ptrdiff_t(have), prompts[0].begin()))
      fail("recall: a question prompt does not extend the context already in the cache");
    size_t i = have;
    while (i < common && i < p.size() && p[i] == prompts[0][i]) ++i;
    common = i;
  }
  // Leave at least one token per prompt to evaluate (its logits start the answer).
  for (const auto& p : prompts) common = std::min(common, p.size() - 1);
  if (common > have)
    model.eval_last(cache, std::span<const int32_t>(prompts[0].data() + have, common - have), pool,
                    opts.ubatch);

  std::vector<Answer> out;
  if (prompts.size() == 1) {
    out.push_back(greedy_answer(model, pool, tok, cache,
                                std::span<const int32_t>(prompts[0]).subspan(common), opts));
    return out;
  }
  const std::string path = session_path();
  cache.save(path, model.fingerprint());
  try {
    for (const auto& p : prompts) {
      kv::KvCache q(cache.shape(), cache.config());
      q.load(path, model.fingerprint());
      out.push_back(
          greedy_answer(model, pool, tok, q, std::span<const int32_t>(p).subspan(common), opts));
    }
  } catch (...) {
    std::filesystem::remove(path);
    throw;
  }
  std::filesystem::remove(path);
  return out;
}

}  // namespace tkv::bench
