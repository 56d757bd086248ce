// The multi-turn recall cell (see recall_protocol.h): a conversation that
// grows past a window cap, one planted fact per turn, then a question per
// fact answered from the final cache state.
#include <memory>
#include <set>

#include "bench/cell_env.h"
#include "bench/protocols.h"
#include "bench/qa.h"
#include "bench/recall_prompt.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "kv/page_pool.h"

namespace tkv::bench {

namespace {
constexpr int64_t kQuestionRoom = 48;
}

Json recall_multi_turn_cell(const Json& req) {
  CellModel m = load_cell_model(req);
  const model::Model& model = *m.model;
  const tok::Tokenizer tok = tok::Tokenizer::from_gguf(model.gguf());
  const CellKv kv = cell_kv(req, model);
  const kv::KvConfig& config = kv.config;
  const std::string filler_path = req.at("filler_file").get<std::string>();
  const Filler filler(read_file(filler_path), filler_path);
  const PromptFormat format(tok, req.value("chat", std::string()));
  RecallTemplates tmpl;
  tmpl.fact = req.at("fact_template").get<std::string>();
  tmpl.question = req.at("question_template").get<std::string>();
  const int64_t ctx = req.at("ctx").get<int64_t>();
  const int turns = req.at("turns").get<int>();
  const int answer_tokens = req.at("answer_tokens").get<int>();
  // The cap a fact must be older than to count as "scrolled out": the
  // configuration's window, or the window of the paired windowed run.
  const int64_t cap = config.window > 0 ? config.window : req.at("scroll_window").get<int64_t>();
  if (turns < 2) fail("--turns ", turns, ": need at least 2");

  Json conversations = Json::array();
  Json scrolled = {{"correct", 0}, {"total", 0}}, inside = {{"correct", 0}, {"total", 0}};
  int control_hits = 0, controls = 0;
  const int64_t turn_tokens = (ctx - kQuestionRoom - answer_tokens) / turns;
  for (const int seed : req.at("seeds").get<std::vector<int>>()) {
    const uint64_t s = mix_seed(uint64_t(seed), 0x6d74);
    const std::vector<FactSpec> specs = make_facts(turns, s);
    runtime::Sequence session(model, tok, int(ctx) + 64, config,  // room for questions
                                      kv.make_pool(), *m.pool, m.ubatch);
    std::vector<std::string> texts;
    std::vector<int64_t> fact_pos;
    std::vector<int32_t> tokens;
    for (int t = 0; t < turns; ++t) {
      // Each turn: filler with this turn's fact in the middle.
      const Document d = build_document(
          tok, filler, size_t(mix_seed(s, uint64_t(t)) % filler.size()),
          {{specs[size_t(t)], 0.5, "turn " + std::to_string(t + 1), -1}}, tmpl, turn_tokens);
      texts.push_back(d.text);
      fact_pos.push_back(int64_t(tokens.size()) + d.facts[0].token_pos - 1);  // minus its BOS
      std::vector<int32_t> now = format.conversation(texts);
      if (now.size() < tokens.size() || !std::equal(tokens.begin(), tokens.end(), now.begin()))
        fail("recall multi-turn: turn ", t + 1, " changed the tokens of earlier turns");
      // The turn arrives as its own evaluation, the cache carrying the
      // conversation so far (as in a chat).
      session.feed(
          std::span<const int32_t>(now.data() + tokens.size(), now.size() - tokens.size()));
      tokens = std::move(now);
    }
    std::vector<std::vector<int32_t>> prompts;
    for (int t = 0; t < turns; ++t)
      prompts.push_back(format.conversation_question(
          texts, fill_template(tmpl.question, specs[size_t(t)].name, "")));
    prompts.push_back(
        format.conversation_question(texts, fill_template(tmpl.question, specs.back().name, "")));
    AskOptions ao;
    ao.max_answer_tokens = answer_tokens;
    const std::vector<Answer> answers = answer_prompts(session, prompts, ao);

    Json facts = Json::array();
    std::set<std::string> planted;
    for (int t = 0; t < turns; ++t) planted.insert(specs[size_t(t)].code);
    for (int t = 0; t < turns; ++t) {
      const Answer& a = answers[size_t(t)];
      const int64_t after = a.prompt_tokens - fact_pos[size_t(t)];
      const bool correct = a.digits == specs[size_t(t)].code;
      Json& bucket = after > cap ? scrolled : inside;
      bucket["correct"] = bucket["correct"].get<int>() + int(correct);
      bucket["total"] = bucket["total"].get<int>() + 1;
      facts.push_back({{"turn", t + 1},
                       {"name", specs[size_t(t)].name},
                       {"code", specs[size_t(t)].code},
                       {"token_pos", fact_pos[size_t(t)]},
                       {"tokens_after", after},
                       {"older_than_cap", after > cap},
                       {"answer", a.text},
                       {"correct", correct}});
    }
    const bool hit = planted.count(answers.back().digits) > 0;
    control_hits += hit;
    ++controls;
    conversations.push_back({{"seed", seed},
                             {"tokens", tokens.size()},
                             {"kv_tokens_kept", session.cache().stats().tokens_kept},
                             {"facts", facts},
                             {"control",
                              {{"name", specs.back().name},
                               {"answer", answers.back().text},
                               {"planted_code_hit", hit}}}});
  }
  return {{"status", "ok"},
          {"kv_describe", config.describe()},
          {"kv_ram", kv.describe()},
          {"cap", cap},
          {"scrolled_out", scrolled},
          {"in_window", inside},
          {"control_planted_rate", controls ? double(control_hits) / controls : 0.0},
          {"conversations", conversations}};
}

}  // namespace tkv::bench
