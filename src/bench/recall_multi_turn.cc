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

// What every conversation of one cell shares.
struct MultiTurnSetup {
  const model::Model& model;
  const tok::Tokenizer& tok;
  const CellKv& kv;
  ThreadPool& pool;
  int ubatch = 0;
  const Filler& filler;
  const PromptFormat& format;
  const RecallTemplates& tmpl;
  int64_t ctx = 0;
  int turns = 0, answer_tokens = 0;
  int64_t cap = 0;          // the age past which a fact has scrolled out
  int64_t turn_tokens = 0;  // tokens per turn (the questions' room left over)
};

// The conversation so far: each turn's text, the position of each turn's
// fact, and the tokens the cache has been fed.
struct Turns {
  std::vector<std::string> texts;
  std::vector<int64_t> fact_pos;
  std::vector<int32_t> tokens;
};

// Plays the turns into `session`, one fact per turn.
Turns play_turns(const MultiTurnSetup& su, runtime::Sequence& session,
                 const std::vector<FactSpec>& specs, uint64_t s) {
  Turns c;
  for (int t = 0; t < su.turns; ++t) {
    // Each turn: filler with this turn's fact in the middle.
    const Document d = build_document(
        su.tok, su.filler, size_t(mix_seed(s, uint64_t(t)) % su.filler.size()),
        {{specs[size_t(t)], 0.5, "turn " + std::to_string(t + 1), -1}}, su.tmpl, su.turn_tokens);
    c.texts.push_back(d.text);
    c.fact_pos.push_back(int64_t(c.tokens.size()) + d.facts[0].token_pos - 1);  // minus its BOS
    std::vector<int32_t> now = su.format.conversation(c.texts);
    if (now.size() < c.tokens.size() || !std::equal(c.tokens.begin(), c.tokens.end(), now.begin()))
      fail("recall multi-turn: turn ", t + 1, " changed the tokens of earlier turns");
    // The turn arrives as its own evaluation, the cache carrying the
    // conversation so far (as in a chat).
    session.feed(
        std::span<const int32_t>(now.data() + c.tokens.size(), now.size() - c.tokens.size()));
    c.tokens = std::move(now);
  }
  return c;
}

// One question per turn's fact, then the control question (asked last),
// all answered from the cache state the turns left.
std::vector<Answer> ask_questions(const MultiTurnSetup& su, runtime::Sequence& session,
                                  const std::vector<FactSpec>& specs,
                                  const std::vector<std::string>& texts) {
  std::vector<std::vector<int32_t>> prompts;
  for (int t = 0; t < su.turns; ++t)
    prompts.push_back(su.format.conversation_question(
        texts, fill_template(su.tmpl.question, specs[size_t(t)].name, "")));
  prompts.push_back(su.format.conversation_question(
      texts, fill_template(su.tmpl.question, specs.back().name, "")));
  AskOptions ao;
  ao.max_answer_tokens = su.answer_tokens;
  return answer_prompts(session, prompts, ao);
}

// The cell's running totals: facts older than the cap and inside it, and
// how often the control answer was one of the planted codes.
struct MultiTurnTally {
  Json scrolled = {{"correct", 0}, {"total", 0}}, inside = {{"correct", 0}, {"total", 0}};
  int control_hits = 0, controls = 0;
};

// Each fact's answer, scored into the scrolled-out or in-window bucket by
// its age when asked.
Json score_facts(const MultiTurnSetup& su, const std::vector<FactSpec>& specs, const Turns& c,
                 const std::vector<Answer>& answers, MultiTurnTally& tally) {
  Json facts = Json::array();
  for (int t = 0; t < su.turns; ++t) {
    const Answer& a = answers[size_t(t)];
    const int64_t after = a.prompt_tokens - c.fact_pos[size_t(t)];
    const bool correct = a.digits == specs[size_t(t)].code;
    Json& bucket = after > su.cap ? tally.scrolled : tally.inside;
    bucket["correct"] = bucket["correct"].get<int>() + int(correct);
    bucket["total"] = bucket["total"].get<int>() + 1;
    facts.push_back({{"turn", t + 1},
                     {"name", specs[size_t(t)].name},
                     {"code", specs[size_t(t)].code},
                     {"token_pos", c.fact_pos[size_t(t)]},
                     {"tokens_after", after},
                     {"older_than_cap", after > su.cap},
                     {"answer", a.text},
                     {"correct", correct}});
  }
  return facts;
}

// One seed's conversation: its turns, its questions, its row.
Json run_conversation(const MultiTurnSetup& su, int seed, MultiTurnTally& tally) {
  const uint64_t s = mix_seed(uint64_t(seed), 0x6d74);
  const std::vector<FactSpec> specs = make_facts(su.turns, s);
  runtime::Sequence session(su.model, su.tok, int(su.ctx) + 64, su.kv.config,  // room for questions
                            su.kv.make_pool(), su.pool, su.ubatch);
  const Turns c = play_turns(su, session, specs, s);
  const std::vector<Answer> answers = ask_questions(su, session, specs, c.texts);
  std::set<std::string> planted;
  for (int t = 0; t < su.turns; ++t) planted.insert(specs[size_t(t)].code);
  const Json facts = score_facts(su, specs, c, answers, tally);
  const bool hit = planted.count(answers.back().digits) > 0;
  tally.control_hits += hit;
  ++tally.controls;
  return {
      {"seed", seed},
      {"tokens", c.tokens.size()},
      {"kv_tokens_kept", session.cache().stats().tokens_kept},
      {"facts", facts},
      {"control",
       {{"name", specs.back().name}, {"answer", answers.back().text}, {"planted_code_hit", hit}}}};
}

}  // namespace

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

  const MultiTurnSetup su{model,
                          tok,
                          kv,
                          *m.pool,
                          m.ubatch,
                          filler,
                          format,
                          tmpl,
                          ctx,
                          turns,
                          answer_tokens,
                          cap,
                          (ctx - kQuestionRoom - answer_tokens) / turns};
  Json conversations = Json::array();
  MultiTurnTally tally;
  for (const int seed : req.at("seeds").get<std::vector<int>>())
    conversations.push_back(run_conversation(su, seed, tally));
  return {
      {"status", "ok"},
      {"kv_describe", config.describe()},
      {"kv_ram", kv.describe()},
      {"cap", cap},
      {"scrolled_out", tally.scrolled},
      {"in_window", tally.inside},
      {"control_planted_rate", tally.controls ? double(tally.control_hits) / tally.controls : 0.0},
      {"conversations", conversations}};
}

}  // namespace tkv::bench
