// Prompts for the recall protocol: facts ("The access code for Amber Falcon
// is 48213.": two capitalised words, five digits -- the format the tkv-test
// models were trained on) planted at chosen depths in filler text, and one
// question per fact at the end. Everything is a pure function of the seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tkv::bench {

struct RecallTemplates {
  std::string fact = "The access code for {name} is {code}.";
  std::string question = "Question: what is the access code for {name}? Answer:";
};
// "{name}" and "{code}" replaced (every occurrence).
std::string fill_template(const std::string& tmpl, const std::string& name,
                          const std::string& code);

struct FactSpec {
  std::string name, code;
};
// n distinct names (two capitalised words) with five-digit codes, plus
// (n+1)-th: a name for the absent-fact control question (never planted).
std::vector<FactSpec> make_facts(int n, uint64_t seed);

// Filler text cut into segments at sentence ends (". "), each at most ~400
// bytes; facts go between segments.
class Filler {
 public:
  Filler(const std::string& text, const std::string& source);
  size_t size() const { return segments_.size(); }
  const std::string& segment(size_t i) const { return segments_[i % segments_.size()]; }

 private:
  std::vector<std::string> segments_;
};

struct PlacedFact {
  FactSpec fact;
  double depth = 0;         // requested, fraction of the filler tokens before it
  std::string depth_label;  // "0%", "25%", ..., or "W1024+" (just past a window)
  int64_t token_pos = 0;    // first token of the fact line in the document
};

struct Document {
  std::string text;  // filler with fact lines; no trailing whitespace
  std::vector<PlacedFact> facts;
  int64_t tokens = 0;  // of text, BOS included
};

struct FactPlacement {
  FactSpec fact;
  double depth = 0;  // in [0, 1]
  std::string label;
  int64_t tokens_before_end = -1;  // >= 0: place so that about this many filler tokens follow
};

// Builds a document of about `target_tokens` tokens (BOS included): filler
// segments from `first_segment` on, fact lines ("\n<fact>\n") inserted where
// the filler tokens before them reach each fact's depth.
Document build_document(const tok::Tokenizer& tok, const Filler& filler, size_t first_segment,
                        const std::vector<FactPlacement>& facts, const RecallTemplates& tmpl,
                        int64_t target_tokens);

// First maximal run of ASCII digits in `text` ("" if none).
std::string first_digit_run(const std::string& text);

// How context and questions become tokens. Plain (the tkv-test format): BOS,
// the text, one space, the question. Chat: the model's chat template (or a
// named one): the context as a user message, the question in the same
// message (single document) or as the next user turn (conversation), with
// the assistant's generation prompt.
class PromptFormat {
 public:
  // chat: "" = plain, "auto" = the tokenizer's template, else a template name.
  PromptFormat(const tok::Tokenizer& tok, const std::string& chat);
  bool is_chat() const { return chat_; }

  std::vector<int32_t> document_question(const std::string& doc, const std::string& question) const;
  // A conversation of user turns, each answered "OK." by the assistant
  // (plain: the turns joined by newlines).
  std::vector<int32_t> conversation(const std::vector<std::string>& turns) const;
  std::vector<int32_t> conversation_question(const std::vector<std::string>& turns,
                                             const std::string& question) const;

 private:
  std::vector<int32_t> render(const std::vector<std::pair<std::string, std::string>>& messages,
                              bool generation_prompt) const;
  const tok::Tokenizer& tok_;
  bool chat_ = false;
  std::string template_name_;
};

uint64_t mix_seed(uint64_t seed, uint64_t salt);

}  // namespace tkv::bench
