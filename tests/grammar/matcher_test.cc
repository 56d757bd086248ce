#include <gtest/gtest.h>

#include <string>

#include "grammar/utf8_ranges.h"
#include "grammar_test_util.h"

namespace tkv::grammar {
namespace {

using test::gbnf;

TEST(Matcher, StatesAdvanceByteByByte) {
  Matcher m(gbnf(R"(root ::= "ab" | "ac" "d"?)"));
  const Matcher::State s0 = m.start();
  EXPECT_FALSE(m.accepting(s0));
  const Matcher::State a = m.step(s0, 'a');
  ASSERT_NE(a, Matcher::kDead);
  EXPECT_FALSE(m.accepting(a));
  EXPECT_EQ(m.step(a, 'x'), Matcher::kDead);
  const Matcher::State ab = m.step(a, 'b');
  EXPECT_TRUE(m.accepting(ab));
  EXPECT_TRUE(m.complete(ab));  // nothing may follow "ab"
  const Matcher::State ac = m.advance(s0, "ac");
  EXPECT_TRUE(m.accepting(ac));
  EXPECT_FALSE(m.complete(ac));  // "d" may follow
  EXPECT_TRUE(m.complete(m.step(ac, 'd')));
  EXPECT_EQ(m.advance(s0, "acdd"), Matcher::kDead);
  EXPECT_EQ(m.step(Matcher::kDead, 'a'), Matcher::kDead);
  // The same bytes give the same (cached) state.
  EXPECT_EQ(m.advance(s0, "ab"), ab);
}

TEST(Matcher, LoopsReuseTheirStates) {
  Matcher m(gbnf(R"(root ::= "\"" [^"]* "\"")"));
  const Matcher::State in = m.step(m.start(), '"');
  const Matcher::State after = m.advance(in, "hello world");
  EXPECT_EQ(after, in);  // inside the string again: the same parse situation
  const size_t states = m.state_count();
  m.advance(in, "more text, the same states");
  EXPECT_EQ(m.state_count(), states);
  EXPECT_TRUE(m.complete(m.step(after, '"')));
}

TEST(Matcher, MultiByteCharactersArePartialStates) {
  Matcher m(gbnf(R"(root ::= [^a]+)"));
  const Matcher::State half = m.step(m.start(), 0xC3);
  ASSERT_NE(half, Matcher::kDead);  // é's first byte: may still become a character
  EXPECT_FALSE(m.accepting(half));  // but is not one yet
  EXPECT_TRUE(m.accepting(m.step(half, 0xA9)));
  EXPECT_EQ(m.step(half, 'b'), Matcher::kDead);        // not a continuation byte
  EXPECT_EQ(m.step(m.start(), 0x80), Matcher::kDead);  // a lone continuation byte
  EXPECT_EQ(m.step(m.start(), 0xC0), Matcher::kDead);  // never valid UTF-8
  EXPECT_EQ(m.step(m.start(), 0xF5), Matcher::kDead);
  EXPECT_EQ(m.advance(m.start(), "\xE0\x80\x80"), Matcher::kDead);  // overlong
}

TEST(Matcher, CompactKeepsTheCurrentState) {
  Matcher m(gbnf(R"(root ::= [a-z]* "." [0-9]{0,5})"));
  const Matcher::State s = m.advance(m.start(), "abc.");
  m.advance(s, "12345");
  ASSERT_GT(m.state_count(), 2u);
  const Matcher::State kept = m.compact(s, 1);
  EXPECT_EQ(m.state_count(), 2u);  // the start state and the one kept
  EXPECT_TRUE(m.accepting(kept));
  EXPECT_TRUE(m.accepting(m.advance(kept, "42")));
  EXPECT_EQ(m.advance(kept, "x"), Matcher::kDead);
  EXPECT_EQ(m.compact(kept, 100), kept);  // under the limit: unchanged
}

TEST(Matcher, AmbiguityIsBounded) {
  // Every split of a run of "a" into "a" and "aa" is a different parse
  // stack; interning keeps the count small.
  Matcher m(gbnf(R"(root ::= ("a" | "aa")* "b")"));
  const Matcher::State s = m.advance(m.start(), std::string(200, 'a'));
  ASSERT_NE(s, Matcher::kDead);
  EXPECT_TRUE(m.accepting(m.step(s, 'b')));
  EXPECT_LT(m.state_count(), 10u);
}

TEST(Utf8Ranges, EverySequenceIsExactlyTheRange) {
  // Brute force over all code points of a few ranges: a code point's
  // encoding matches one of the sequences exactly when it is in the range.
  const std::pair<uint32_t, uint32_t> ranges[] = {{0x41, 0x5A},      {0x70, 0x900},
                                                  {0x7FF, 0x800},    {0xD000, 0xE100},
                                                  {0xFFF0, 0x10010}, {0, 0x10FFFF}};
  for (const auto& [lo, hi] : ranges) {
    std::vector<Utf8Sequence> seqs;
    append_utf8_sequences(lo, hi, seqs);
    for (uint32_t cp = (lo > 0x100 ? lo - 0x100 : 0); cp <= std::min(hi + 0x100, 0x10FFFFu);
         cp += (hi - lo > 0x20000 ? 97 : 1)) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      std::string enc;
      append_utf8(cp, enc);
      bool found = false;
      for (const Utf8Sequence& s : seqs) {
        if (s.size() != enc.size()) continue;
        bool all = true;
        for (size_t i = 0; i < s.size(); ++i)
          all = all && uint8_t(enc[i]) >= s[i].lo && uint8_t(enc[i]) <= s[i].hi;
        found = found || all;
      }
      EXPECT_EQ(found, cp >= lo && cp <= hi) << std::hex << cp;
    }
  }
}

}  // namespace
}  // namespace tkv::grammar
