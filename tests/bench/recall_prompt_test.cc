// Fact generation, templates and answer extraction of the recall protocol.
#include <gtest/gtest.h>

#include <set>
#include <string_view>

#include "bench/recall_prompt.h"
#include "common/error.h"

namespace tkv::bench {
namespace {

// "[A-Z][a-z]+" (std::regex is avoided: GCC 12 warns inside it under the
// sanitizers).
bool capitalised_word(std::string_view w) {
  if (w.size() < 2 || w[0] < 'A' || w[0] > 'Z') return false;
  for (char ch : w.substr(1))
    if (ch < 'a' || ch > 'z') return false;
  return true;
}
bool two_capitalised_words(std::string_view s) {
  const size_t space = s.find(' ');
  return space != std::string_view::npos && capitalised_word(s.substr(0, space)) &&
         capitalised_word(s.substr(space + 1));
}
// "[1-9][0-9]{4}"
bool five_digit_code(std::string_view s) {
  if (s.size() != 5 || s[0] < '1' || s[0] > '9') return false;
  for (char ch : s)
    if (ch < '0' || ch > '9') return false;
  return true;
}

TEST(RecallFacts, TwoCapitalisedWordsAndFiveDigitsAllDistinct) {
  const auto facts = make_facts(8, 42);
  ASSERT_EQ(facts.size(), 9u);  // 8 planted + the control name
  std::set<std::string> names, codes, firsts, seconds;
  for (const auto& f : facts) {
    EXPECT_TRUE(two_capitalised_words(f.name)) << f.name;
    EXPECT_TRUE(five_digit_code(f.code)) << f.code;
    names.insert(f.name);
    codes.insert(f.code);
    firsts.insert(f.name.substr(0, f.name.find(' ')));
    seconds.insert(f.name.substr(f.name.find(' ') + 1));
  }
  EXPECT_EQ(names.size(), facts.size());
  EXPECT_EQ(codes.size(), facts.size());
  // No name shares a word with another: no partial matches to confuse.
  EXPECT_EQ(firsts.size(), facts.size());
  EXPECT_EQ(seconds.size(), facts.size());
}

TEST(RecallFacts, DeterministicPerSeed) {
  const auto a = make_facts(5, 7), b = make_facts(5, 7), c = make_facts(5, 8);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].code, b[i].code);
  }
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) differs |= a[i].code != c[i].code;
  EXPECT_TRUE(differs);
}

TEST(RecallTemplates, FillsEveryPlaceholder) {
  RecallTemplates t;
  EXPECT_EQ(fill_template(t.fact, "Amber Falcon", "48213"),
            "The access code for Amber Falcon is 48213.");
  EXPECT_EQ(fill_template(t.question, "Amber Falcon", ""),
            "Question: what is the access code for Amber Falcon? Answer:");
  EXPECT_EQ(fill_template("{name}/{name}", "A B", ""), "A B/A B");
}

TEST(RecallAnswers, FirstDigitRun) {
  EXPECT_EQ(first_digit_run(" 48213."), "48213");
  EXPECT_EQ(first_digit_run("The code is 12345 and 678"), "12345");
  EXPECT_EQ(first_digit_run("no digits"), "");
  EXPECT_EQ(first_digit_run(" 4821"), "4821");
}

TEST(RecallFiller, SentenceSegmentsOfBoundedLength) {
  std::string text;
  for (int i = 0; i < 30; ++i) text += "This is sentence number " + std::to_string(i) + ". ";
  text += std::string(1000, 'x') + " " + std::string(1000, 'y') + " tail.";
  const Filler f(text, "test");
  EXPECT_GE(f.size(), 30u);
  EXPECT_EQ(f.segment(0), "This is sentence number 0. ");
  for (size_t i = 0; i < f.size(); ++i) EXPECT_LE(f.segment(i).size(), 1100u);
  EXPECT_EQ(f.segment(f.size()), f.segment(0));  // wraps around
  EXPECT_THROW(Filler("one. two.", "tiny"), Error);
}

}  // namespace
}  // namespace tkv::bench
