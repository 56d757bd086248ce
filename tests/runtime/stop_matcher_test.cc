// Stop strings in streamed text: never shown, not even partially.
#include "runtime/stop_matcher.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tkv::runtime {
namespace {

// Feeds `pieces` one at a time; returns everything shown (with a flush at the end).
std::string stream(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string shown;
  for (const auto& p : pieces) {
    shown += m.push(p);
    if (m.stopped()) return shown;
  }
  return shown + m.flush();
}

TEST(StopMatcher, PassesTextThroughWithoutStops) {
  StopMatcher m({});
  EXPECT_EQ(m.push("hello "), "hello ");
  EXPECT_EQ(m.push("world"), "world");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, HoldsBackAPossibleStartAndReleasesItWhenItIsNot) {
  StopMatcher m({"<|end|>"});
  EXPECT_EQ(m.push("a <|e"), "a ");  // "<|e" could become "<|end|>"
  EXPECT_EQ(m.push("x"), "<|ex");    // it did not
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, StopSplitOverPiecesIsNeverShown) {
  StopMatcher m({"User:"});
  EXPECT_EQ(stream(m, {"Sure.", "\nUs", "er", ": more"}), "Sure.\n");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "User:");
  EXPECT_EQ(m.push("ignored"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  StopMatcher m({"BB", "A"});
  EXPECT_EQ(stream(m, {"xxBBxA"}), "xx");
  EXPECT_EQ(m.matched(), "BB");
}

TEST(StopMatcher, PartialMatchAtTheEndIsFlushed) {
  StopMatcher m({"###"});
  EXPECT_EQ(stream(m, {"a#", "#"}), "a##");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, OverlappingPrefixes) {
  // "aab" must be found although "aa" looked like a start of "aab" one char early.
  StopMatcher m({"aab"});
  EXPECT_EQ(stream(m, {"a", "a", "a", "b", "c"}), "a");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, ResetStartsOver) {
  StopMatcher m({"x"});
  EXPECT_EQ(m.push("abx"), "ab");
  m.reset();
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("cd"), "cd");
}

}  // namespace
}  // namespace tkv::runtime
