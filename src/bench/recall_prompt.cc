#include "bench/recall_prompt.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>

#include "common/error.h"
#include "tokenizer/chat_template.h"

namespace tkv::bench {

namespace {

// Two word lists for "Amber Falcon"-style names: 48 x 48 combinations.
constexpr const char* kFirst[] = {
    "Amber", "Azure",   "Bold",   "Brisk",  "Cedar",  "Copper",  "Crimson", "Dusty",
    "Ember", "Fable",   "Frost",  "Gentle", "Golden", "Granite", "Hazel",   "Indigo",
    "Ivory", "Jade",    "Lunar",  "Maple",  "Marble", "Misty",   "Noble",   "Ocean",
    "Olive", "Onyx",    "Pearl",  "Quiet",  "Rapid",  "Raven",   "Ruby",    "Rusty",
    "Sable", "Scarlet", "Silent", "Silver", "Solar",  "Stone",   "Storm",   "Swift",
    "Tawny", "Velvet",  "Violet", "Wild",   "Winter", "Yellow",  "Zesty",   "Lucky"};
constexpr const char* kSecond[] = {
    "Badger",  "Bear",    "Beacon",  "Bison",  "Canyon", "Cobra",   "Comet",  "Condor",
    "Coyote",  "Crane",   "Delta",   "Dragon", "Eagle",  "Falcon",  "Ferret", "Fox",
    "Gazelle", "Glacier", "Harbor",  "Hawk",   "Heron",  "Ibis",    "Jaguar", "Kestrel",
    "Lantern", "Leopard", "Lynx",    "Meadow", "Mesa",   "Moose",   "Otter",  "Owl",
    "Panther", "Pelican", "Phoenix", "Pine",   "Quarry", "Raccoon", "River",  "Salmon",
    "Sparrow", "Summit",  "Tiger",   "Tundra", "Valley", "Walrus",  "Willow", "Wolf"};

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
}

int64_t count_tokens(const tok::Tokenizer& tok, const std::string& text) {
  return int64_t(tok.encode(text, /*add_special=*/false, false).size());
}

}  // namespace

uint64_t mix_seed(uint64_t seed, uint64_t salt) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + salt + 0x632be59bd9b4e019ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string fill_template(const std::string& tmpl, const std::string& name,
                          const std::string& code) {
  std::string s = tmpl;
  replace_all(s, "{name}", name);
  replace_all(s, "{code}", code);
  return s;
}

std::vector<FactSpec> make_facts(int n, uint64_t seed) {
  constexpr size_t n1 = std::size(kFirst), n2 = std::size(kSecond);
  std::vector<FactSpec> out;
  std::set<std::string> names, codes;
  for (uint64_t i = 0; int(out.size()) < n + 1; ++i) {
    const uint64_t r = mix_seed(seed, 1000 + i);
    // Distinct first words and second words too, so no name is a partial
    // match of another ("Amber Falcon" / "Amber Fox").
    const std::string first = kFirst[r % n1], second = kSecond[(r / n1) % n2];
    bool clash = false;
    for (const auto& f : out)
      if (f.name.rfind(first + " ", 0) == 0 || f.name.substr(f.name.find(' ') + 1) == second)
        clash = true;
    const std::string code = std::to_string(10000 + (r / (n1 * n2)) % 90000);
    if (clash || !names.insert(first + " " + second).second || !codes.insert(code).second) continue;
    out.push_back({first + " " + second, code});
  }
  return out;
}

Filler::Filler(const std::string& text, const std::string& source) {
  constexpr size_t kMaxSegment = 400;
  std::string cur;
  auto flush = [&] {
    if (cur.find_first_not_of(" \n\t") != std::string::npos) segments_.push_back(cur);
    cur.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i] == '\n' || text[i] == '\r' || text[i] == '\t' ? ' ' : text[i];
    if (c == ' ' && !cur.empty() && cur.back() == ' ') continue;
    cur += c;
    const bool sentence_end = c == ' ' && cur.size() >= 2 && cur[cur.size() - 2] == '.';
    if (sentence_end || (c == ' ' && cur.size() >= kMaxSegment)) flush();
  }
  flush();
  if (segments_.size() < 4)
    fail(source, ": too little filler text (", segments_.size(), " segments)");
}

Document build_document(const tok::Tokenizer& tok, const Filler& filler, size_t first_segment,
                        const std::vector<FactPlacement>& facts, const RecallTemplates& tmpl,
                        int64_t target_tokens) {
  // Tokens the fact lines take; the rest is filler.
  int64_t fact_tokens = 0;
  for (const auto& f : facts)
    fact_tokens +=
        count_tokens(tok, str("\n", fill_template(tmpl.fact, f.fact.name, f.fact.code))) + 1;
  int64_t budget = target_tokens - 1 - fact_tokens;
  if (budget < 16) fail("recall: --ctx ", target_tokens, " leaves no room for filler");

  for (int attempt = 0; attempt < 4; ++attempt) {
    // Filler segments and their token counts, up to the budget.
    std::vector<std::string> segs;
    std::vector<int64_t> cum{0};
    for (size_t i = first_segment; cum.back() < budget; ++i) {
      const std::string& s = filler.segment(i);
      const int64_t n = count_tokens(tok, s);
      if (cum.back() + n > budget && !segs.empty()) break;
      segs.push_back(s);
      cum.push_back(cum.back() + n);
      if (segs.size() > 100000) fail("recall: filler segments produce no tokens");
    }
    const int64_t total = cum.back();
    // Insertion point of each fact: the segment boundary closest to its depth.
    std::vector<std::pair<size_t, size_t>> at;  // (boundary, fact index)
    for (size_t f = 0; f < facts.size(); ++f) {
      const double want = facts[f].tokens_before_end >= 0
                              ? double(std::max<int64_t>(0, total - facts[f].tokens_before_end))
                              : facts[f].depth * double(total);
      size_t best = 0;
      for (size_t b = 1; b < cum.size(); ++b)
        if (std::abs(double(cum[b]) - want) < std::abs(double(cum[best]) - want)) best = b;
      at.emplace_back(best, f);
    }
    std::stable_sort(at.begin(), at.end());
    Document doc;
    std::vector<std::pair<size_t, std::string>> prefix_at_fact;  // (fact index, text before it)
    size_t next = 0;
    for (size_t b = 0; b <= segs.size(); ++b) {
      for (; next < at.size() && at[next].first == b; ++next) {
        const FactPlacement& f = facts[at[next].second];
        while (!doc.text.empty() && doc.text.back() == ' ') doc.text.pop_back();
        if (!doc.text.empty()) doc.text += "\n";
        prefix_at_fact.emplace_back(at[next].second, doc.text);
        doc.text += fill_template(tmpl.fact, f.fact.name, f.fact.code) + "\n";
      }
      if (b < segs.size()) doc.text += segs[b];
    }
    while (!doc.text.empty() && (doc.text.back() == ' ' || doc.text.back() == '\n'))
      doc.text.pop_back();
    doc.tokens = int64_t(tok.encode(doc.text, /*add_special=*/true, false).size());
    if (doc.tokens > target_tokens) {  // segment estimates ran over: shrink and retry
      budget -= doc.tokens - target_tokens + 8;
      continue;
    }
    doc.facts.resize(facts.size());
    for (const auto& [f, prefix] : prefix_at_fact) {
      PlacedFact& p = doc.facts[f];
      p.fact = facts[f].fact;
      p.depth = facts[f].depth;
      p.depth_label = facts[f].label;
      p.token_pos = int64_t(tok.encode(prefix, /*add_special=*/true, false).size());
    }
    return doc;
  }
  fail("recall: could not fit the document into ", target_tokens, " tokens");
}

std::string first_digit_run(const std::string& text) {
  size_t b = 0;
  while (b < text.size() && !(text[b] >= '0' && text[b] <= '9')) ++b;
  size_t e = b;
  while (e < text.size() && text[e] >= '0' && text[e] <= '9') ++e;
  return text.substr(b, e - b);
}

PromptFormat::PromptFormat(const tok::Tokenizer& tok, const std::string& chat)
    : tok_(tok), chat_(!chat.empty()), template_name_(chat == "auto" ? "" : chat) {
  if (chat_) (void)tok::ChatTemplate::for_tokenizer(tok_, template_name_);  // validates the name
}

std::vector<int32_t> PromptFormat::render(
    const std::vector<std::pair<std::string, std::string>>& messages,
    bool generation_prompt) const {
  const tok::ChatTemplate t = tok::ChatTemplate::for_tokenizer(tok_, template_name_);
  std::vector<tok::ChatMessage> msgs;
  for (const auto& [role, content] : messages) msgs.push_back({role, content});
  return tok_.encode(t.apply(msgs, generation_prompt), /*add_special=*/true,
                     /*parse_special=*/true);
}

std::vector<int32_t> PromptFormat::document_question(const std::string& doc,
                                                     const std::string& question) const {
  if (!chat_) return tok_.encode(doc + " " + question, /*add_special=*/true, false);
  return render({{"user", doc + "\n\n" + question}}, true);
}

std::vector<int32_t> PromptFormat::conversation(const std::vector<std::string>& turns) const {
  if (!chat_) {
    std::string text;
    for (const auto& t : turns) text += (text.empty() ? "" : "\n") + t;
    return tok_.encode(text, /*add_special=*/true, false);
  }
  std::vector<std::pair<std::string, std::string>> msgs;
  for (const auto& t : turns) {
    msgs.emplace_back("user", t);
    msgs.emplace_back("assistant", "OK.");
  }
  return render(msgs, false);
}

std::vector<int32_t> PromptFormat::conversation_question(const std::vector<std::string>& turns,
                                                         const std::string& question) const {
  if (!chat_) {
    std::string text;
    for (const auto& t : turns) text += (text.empty() ? "" : "\n") + t;
    return tok_.encode(text + " " + question, /*add_special=*/true, false);
  }
  std::vector<std::pair<std::string, std::string>> msgs;
  for (const auto& t : turns) {
    msgs.emplace_back("user", t);
    msgs.emplace_back("assistant", "OK.");
  }
  msgs.emplace_back("user", question);
  return render(msgs, true);
}

}  // namespace tkv::bench
