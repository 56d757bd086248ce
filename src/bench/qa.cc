#include "bench/qa.h"

#include <algorithm>
#include <memory>

#include "bench/recall_prompt.h"
#include "common/error.h"
#include "sample/sampler.h"

namespace tkv::bench {

namespace {

bool answer_complete(const std::string& text) {
  const size_t d = text.find_first_of("0123456789");
  if (d != std::string::npos) {
    const size_t e = text.find_first_not_of("0123456789", d);
    if (e != std::string::npos) return true;
  }
  const size_t nl = text.find('\n');
  return nl != std::string::npos && text.find_first_not_of(" \n") < nl;
}

Answer greedy_answer(runtime::Sequence& session, std::span<const int32_t> rest,
                     const AskOptions& opts) {
  Answer a;
  session.feed(rest);
  a.prompt_tokens = session.cache().n_tokens();
  sample::SamplerConfig greedy;
  greedy.temperature = 0;
  session.set_sampler(greedy);
  runtime::GenerateOptions go;
  go.max_tokens = opts.max_answer_tokens;
  std::vector<int32_t> generated;
  // The whole answer is decoded after each token (the digits are read from
  // the text as a whole); an answer ends once it is complete.
  runtime::generate(session, go, [&](int32_t id) {
    generated.push_back(id);
    a.text = session.tokenizer().decode(generated);
    return !answer_complete(a.text);
  });
  a.digits = first_digit_run(a.text);
  return a;
}

}  // namespace

std::vector<Answer> answer_prompts(runtime::Sequence& session,
                                   const std::vector<std::vector<int32_t>>& prompts,
                                   const AskOptions& opts) {
  if (prompts.empty()) return {};
  const std::vector<int32_t>& held = session.tokens();
  const size_t have = held.size();
  size_t common = prompts[0].size();
  for (const auto& p : prompts) {
    if (p.size() < have || !std::equal(held.begin(), held.end(), p.begin()))
      fail("recall: a question prompt does not extend the context already in the cache");
    size_t i = have;
    while (i < common && i < p.size() && p[i] == prompts[0][i]) ++i;
    common = i;
  }
  // Leave at least one token per prompt to evaluate (its logits start the answer).
  for (const auto& p : prompts) common = std::min(common, p.size() - 1);
  if (common > have)
    session.feed(std::span<const int32_t>(prompts[0].data() + have, common - have));

  std::vector<Answer> out;
  if (prompts.size() == 1) {
    out.push_back(
        greedy_answer(session, std::span<const int32_t>(prompts[0]).subspan(common), opts));
    return out;
  }
  for (const auto& p : prompts) {
    const std::unique_ptr<runtime::Sequence> question = session.fork();
    out.push_back(greedy_answer(*question, std::span<const int32_t>(p).subspan(common), opts));
  }
  return out;
}

}  // namespace tkv::bench
