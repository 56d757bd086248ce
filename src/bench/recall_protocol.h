// bench recall: can the model still find what it was told, through the
// compressed cache?
//
// Single document (one fresh process per configuration, all seeds in it):
// per seed, N facts (--facts, default 5) are planted at controlled depths
// (--depths, default evenly spread: start, 25%, 50%, 75%, end) in filler
// text (--filler, default find_heldout_text()) of about --ctx tokens; with a
// window policy in the run, one more fact is planted just past the window
// (W + 64 filler tokens before the end: a window of W tokens has dropped it).
// Then one question per fact, and one about a name never planted (the
// control), each answered independently from the same cache state with
// greedy decoding; a fact counts when the first number in the answer is its
// five-digit code exactly. The control measures guessing: the fraction of
// control answers that are one of the planted codes (lower is better; read
// it against f16's). With --facts 1 and several --depths, each depth is a
// prompt of its own (a clean depth sweep).
//
// Multi-turn (--multi-turn): a conversation of --turns turns, one fact per
// turn, evaluated turn by turn into one cache, grows past a --kv-window cap
// (default 1024); then a question per fact. Each configuration runs as given
// and with the window, so the table shows recall of facts that scrolled out
// of the window (expected ~0) against the same facts without one.
//
// --chat [NAME|auto] wraps document and question in the model's chat
// template (for instruct models); the default is the plain format the
// tkv-test models were trained on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/options.h"
#include "bench/plan.h"
#include "bench/recall_prompt.h"

namespace tkv::bench {

struct RecallOptions {
  int facts = 5;
  std::vector<double> depths;  // empty: evenly spread over [0, 1]
  int64_t ctx = 0;             // 0: min(3200, trained context - 64)
  std::vector<int> seeds{1, 2, 3};
  std::string filler_file;  // the caller resolves the default (find_heldout_text())
  RecallTemplates templates;
  bool question_template_set = false;
  std::string chat;           // "" plain; "auto" = the model's template; or a template name
  int answer_tokens = 0;      // 0: 8 (plain) / 32 (chat)
  bool keep_prompts = false;  // store each document's text in the report (for auditing)
  bool multi_turn = true;
  int turns = 6;
  int multi_turn_window = 1024;
};

// Resolves defaults that depend on the model (ctx, answer length, chat question).
void finalize_recall_options(RecallOptions& r, const ModelInfo& info);

std::vector<PlannedCell> plan_recall(const CommonOptions& o, const RecallOptions& r,
                                     const ModelInfo& info);
// {"options", "rows", "heatmap": {labels, configs, accuracy[][]}, "multi_turn": [...]}
Json summarize_recall(const RecallOptions& r, std::vector<Json> rows);
std::string recall_markdown(const Json& section);

// "0%", "25%", ...: the column label of a depth.
std::string depth_label(double depth);

}  // namespace tkv::bench
