// `turbokv bench agree`: teacher-forced greedy agreement with llama.cpp on
// one GGUF file (docs/BENCHMARKS.md).
//
// Both engines step through one sequence: the prompt, then at each step
// llama.cpp's greedy token (llama-server from --llama-bin, with its two most
// probable tokens via `n_probs`), which turbokv is fed teacher-forced, and
// at each step turbokv's own greedy token is compared with llama.cpp's. Random weights make
// near-ties common and the two engines round differently, so a step counts only where llama.cpp's
// top-2 logit margin (the difference of the two log-probabilities) is at least
// --margin; the result is the agreement on those clear steps.
#pragma once

#include <string>
#include <vector>

#include "bench/json.h"

namespace tkv::bench {

// One step of the comparison.
struct AgreeStep {
  bool llama_known = false;  // llama-server named its token (see run_steps)
  int llama_token = 0, llama_second = 0;
  double llama_margin = -1;  // logprob(top 1) - logprob(top 2); -1: not given
  int turbokv_token = 0;
  double turbokv_margin = 0;
  bool clear = false;  // llama_margin >= the threshold
};

// Clear steps, how many agree, and the steps as JSON rows.
Json agree_summary(const std::vector<AgreeStep>& steps, double margin);
// The report.md section of a summary (with "weights" added).
std::string agree_section_markdown(const Json& section);

// --llama-args: words separated by spaces (bench agree, bench compare).
std::vector<std::string> split_words(const std::string& text);

int agree_main(const std::vector<std::string>& args);

}  // namespace tkv::bench
