#include <gtest/gtest.h>

#include <string>

#include "grammar_test_util.h"

namespace tkv::grammar {
namespace {

using test::error_of;
using test::gbnf;

TEST(Gbnf, LiteralsAlternativesAndGroups) {
  const auto g = gbnf(R"(root ::= "a" ("b" | "cd") "e"  # a comment
)");
  EXPECT_TRUE(matches(g, "abe"));
  EXPECT_TRUE(matches(g, "acde"));
  EXPECT_FALSE(matches(g, "ae"));
  EXPECT_FALSE(matches(g, "abce"));
  EXPECT_FALSE(matches(g, "ab"));  // a prefix is not a sentence
  EXPECT_FALSE(matches(g, "abee"));
}

TEST(Gbnf, RulesReferToEachOther) {
  const auto g = gbnf(R"g(
# balanced parentheses
root ::= item*
item ::= "(" root ")" | "x"
)g");
  EXPECT_TRUE(matches(g, ""));
  EXPECT_TRUE(matches(g, "x(x)((x))()"));
  EXPECT_FALSE(matches(g, "(()"));
  EXPECT_FALSE(matches(g, ")("));
}

TEST(Gbnf, Repetitions) {
  const auto g = gbnf(R"(root ::= "a"+ "b"? "c"* "d"{2} "e"{1,3} "f"{2,} "g"{,1})");
  EXPECT_TRUE(matches(g, "addeff"));
  EXPECT_TRUE(matches(g, "aaabcccddeeefffffg"));
  EXPECT_FALSE(matches(g, "ddeff"));      // a+ needs one
  EXPECT_FALSE(matches(g, "adeff"));      // d{2}
  EXPECT_FALSE(matches(g, "addeeeeff"));  // e{1,3}
  EXPECT_FALSE(matches(g, "addef"));      // f{2,}
  EXPECT_FALSE(matches(g, "addeffgg"));   // g{,1}
  EXPECT_FALSE(matches(g, "abbddeff"));   // b?
  const auto group = gbnf(R"(root ::= ("ab" | "c"){2,3})");
  EXPECT_TRUE(matches(group, "abc"));
  EXPECT_TRUE(matches(group, "ccab"));
  EXPECT_FALSE(matches(group, "ab"));
  EXPECT_FALSE(matches(group, "abababab"));
  // A repeated literal repeats all of it, as in llama.cpp.
  EXPECT_TRUE(matches(gbnf(R"(root ::= "ab"*)"), "abab"));
  EXPECT_FALSE(matches(gbnf(R"(root ::= "ab"*)"), "abb"));
}

TEST(Gbnf, CharacterClasses) {
  const auto g = gbnf(R"(root ::= [a-c0-9_]+ [^x-z\n] .)");
  EXPECT_TRUE(matches(g, "a0_ww"));
  EXPECT_TRUE(matches(g, "cc9-\xC3\xA9"));  // the last character is é
  EXPECT_FALSE(matches(g, "d0ww"));
  EXPECT_FALSE(matches(g, "ayw"));             // [^x-z]
  EXPECT_FALSE(matches(g, "a\nw"));            // [^...\n]
  EXPECT_FALSE(matches(g, "aw\xC3"));          // half a character
  EXPECT_FALSE(matches(g, "aw\xED\xA0\x80"));  // a surrogate is not UTF-8
  const auto unicode = gbnf(R"(root ::= [α-ω]+ [^"])");
  EXPECT_TRUE(matches(unicode, "\xCE\xB1\xCF\x89!"));  // αω!
  EXPECT_FALSE(matches(unicode, "a!"));
  EXPECT_FALSE(matches(unicode, "\xCE\xB1\""));
  EXPECT_TRUE(matches(unicode, "\xCE\xB1\xF0\x9F\x98\x80"));  // a 4-byte character
}

TEST(Gbnf, Escapes) {
  const auto g = gbnf(R"(root ::= "\x41\u00e9\U0001F600\t\n\r\\\"" [\[\]\-])");
  EXPECT_TRUE(matches(g, "A\xC3\xA9\xF0\x9F\x98\x80\t\n\r\\\"-"));
  EXPECT_TRUE(matches(g, "A\xC3\xA9\xF0\x9F\x98\x80\t\n\r\\\"]"));
  EXPECT_FALSE(matches(g, "A\xE9\xF0\x9F\x98\x80\t\n\r\\\"-"));  // \u00e9 is UTF-8 é
}

TEST(Gbnf, NewlinesInsideGroupsAndAfterBars) {
  const auto g = gbnf("root ::= (\n  \"a\"\n  \"b\"\n) |\n  \"c\"\nother ::= \"d\"\n");
  EXPECT_TRUE(matches(g, "ab"));
  EXPECT_TRUE(matches(g, "c"));
  EXPECT_FALSE(matches(g, "d"));
}

TEST(Gbnf, BadGrammarsNameLineAndColumn) {
  const struct {
    const char* text;
    const char* expected;
  } cases[] = {
      {"root ::= \"a", "line 1, column 12: unterminated literal"},
      {"root ::= [a-", "line 1, column 13: unterminated character class"},
      {"root ::= \"a\"\n\nx = \"b\"", "line 3, column 3: expecting '::='"},
      {"root ::= ( \"a\" ", "line 1, column 16: expecting ')'"},
      {"root ::= * \"a\"", "line 1, column 10: expecting an item before '*'"},
      {"root ::= \"\\q\"", "line 1, column 11: unknown escape '\\q'"},
      {"root ::= [z-a]", "line 1, column 14: character range is out of order"},
      {"root ::= \"a\"{3,2}", "repetition maximum below its minimum"},
      {"root ::= \"a\"{2000}", "repetition count over 1000"},
      {"root ::= \"a\" )", "line 1, column 14: expecting a newline"},
      {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
      {"root ::= other", "grammar: rule 'other' is used but not defined"},
      {"item ::= \"a\"", "grammar: no 'root' rule"},
      {"root ::= root \"a\" | \"b\"", "grammar: rule 'root' is left-recursive"},
      {"root ::= x \"a\"\nx ::= \"\" | root", "is left-recursive"},
      {"root ::= \"\\xZZ\"", "expecting 2 hex digits"},
      {"root ::= \"\\uD800\"", "not a Unicode scalar value"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string e = error_of([&] { parse_gbnf(c.text); });
    EXPECT_NE(e.find(c.expected), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_EQ(e.rfind("grammar: ", 0), 0u) << e;
  }
}

TEST(Gbnf, NestingAndSizeAreBounded) {
  const std::string deep = "root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')');
  EXPECT_NE(error_of([&] { parse_gbnf(deep); }).find("nested deeper"), std::string::npos);
  // Repetitions copy what they repeat: 1100 bytes a thousand times.
  const std::string huge = "root ::= \"" + std::string(1100, 'a') + "\"{1000}";
  EXPECT_NE(error_of([&] { parse_gbnf(huge); }).find("too large"), std::string::npos);
}

TEST(Gbnf, DescribeShowsTheRules) {
  const Grammar g = parse_gbnf(R"(root ::= "a" [0-9] | "")");
  const std::string d = g.describe();
  EXPECT_NE(d.find("root ::= \"a\" [\\x30-\\x39] | \"\""), std::string::npos) << d;
}

}  // namespace
}  // namespace tkv::grammar
