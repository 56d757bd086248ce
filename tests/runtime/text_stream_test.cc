// TextStream (runtime/text_stream.h): the one token -> text path of every
// front end, on stories260K's tokenizer: pieces join to the decoded whole,
// stop strings that straddle tokens are never shown, held-back text comes
// out at flush.
#include "runtime/text_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime_fixture.h"
#include "test_util.h"

namespace tkv::runtime {
namespace {

struct Streamed {
  std::vector<std::string> pieces;  // one per push, then flush's
  std::string text;
  bool stopped = false;
  std::string stop_string;
};

Streamed stream(const tok::Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                const std::vector<std::string>& stops) {
  tok::StreamDecoder decoder(tokenizer, tok::StreamDecoder::Start::kTextStart);
  TextStream s(decoder, stops);
  Streamed out;
  for (int32_t id : ids) out.pieces.push_back(s.push(id));
  out.pieces.push_back(s.flush());
  for (const std::string& p : out.pieces) out.text += p;
  out.stopped = s.stopped();
  out.stop_string = s.stop_string();
  return out;
}

class TextStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = test::model_path("stories260K.gguf");
    if (path.empty()) {
      TKV_MISSING_FIXTURE << "fixture stories260K.gguf not found under " << test::models_dir();
    }
    fixture_ = load_model_fixture(path, 0);
  }
  const tok::Tokenizer& tokenizer() const { return *fixture_.tokenizer; }
  std::vector<int32_t> encode(const std::string& text) const {
    return tokenizer().encode(text, false, false);
  }
  ModelFixture fixture_;
};

TEST_F(TextStreamTest, PiecesJoinToTheDecodedWholeWithoutStops) {
  // Accented letters and a snowman: byte-fallback tokens split characters.
  const std::vector<int32_t> ids = encode("Once upon a time, caf\xc3\xa9 \xe2\x98\x83 was open.");
  ASSERT_GT(ids.size(), 5u);
  const Streamed s = stream(tokenizer(), ids, {});
  EXPECT_EQ(s.text, tokenizer().decode(ids));
  EXPECT_FALSE(s.stopped);
  EXPECT_EQ(s.stop_string, "");
}

TEST_F(TextStreamTest, StopStringAcrossTokensIsNeverShown) {
  const std::vector<int32_t> ids = encode("Once upon a time, there was a little girl named Lily.");
  const std::string whole = tokenizer().decode(ids);
  const std::string stop = "little gi";
  ASSERT_NE(whole.find(stop), std::string::npos) << whole;
  const Streamed s = stream(tokenizer(), ids, {"unrelated", stop});
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.stop_string, stop);
  EXPECT_EQ(s.text, whole.substr(0, whole.find(stop)));
  // Nothing after the stop: the pieces of the tokens past it and flush's are empty.
  EXPECT_EQ(s.pieces.back(), "");
  for (const std::string& p : s.pieces) EXPECT_EQ(p.find("gi"), std::string::npos) << p;
}

TEST_F(TextStreamTest, TextThatCouldStartAStopIsHeldBackUntilFlush) {
  const std::vector<int32_t> ids = encode("Once upon a time, there was a");
  const std::string whole = tokenizer().decode(ids);
  // The reply ends inside a possible stop string: its start is held, then
  // handed out at flush since the stop never completed.
  const Streamed s = stream(tokenizer(), ids, {"there was a big dog"});
  EXPECT_FALSE(s.stopped);
  EXPECT_EQ(s.text, whole);
  EXPECT_EQ(s.pieces.back(), "there was a");
}

}  // namespace
}  // namespace tkv::runtime
