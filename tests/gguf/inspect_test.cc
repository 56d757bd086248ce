#include "gguf/inspect.h"

#include <gtest/gtest.h>

#include "common/test_util.h"

namespace tkv::gguf {
namespace {

// Lines of text, for checking whole rows.
std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl; (nl = s.find('\n', start)) != std::string::npos; start = nl + 1)
    out.push_back(s.substr(start, nl - start));
  return out;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const auto& l : lines(text))
    if (l == line) return true;
  return false;
}

TEST(GgufInspect, DescribesHeaderMetadataTensorsAndTotals) {
  GgufWriter w(64);
  std::vector<int32_t> ids(1000);
  for (int k = 0; k < 1000; ++k) ids[k] = k;
  w.set("ids", Value::make_i32s(ids));
  w.set_string("general.name", "tiny");
  w.set_string("tokenizer.chat_template", std::string(500, 'x'));
  std::vector<uint8_t> data(4096);
  w.add_tensor("a.weight", DType::F32, {8, 4}, data.data(), 128);
  w.add_tensor("b.weight", DType::Q8_0, {64, 3}, data.data(), 34 * 2 * 3);
  w.add_tensor("c.weight", DType::F32, {16}, data.data(), 64);
  const auto bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "tiny.gguf");

  InspectOptions opt;
  opt.max_array_elems = 3;
  opt.max_string_bytes = 10;
  const std::string text = describe(f, opt);
  EXPECT_EQ(lines(text)[0], "tiny.gguf");
  EXPECT_EQ(lines(text)[1], "  GGUF version 3, " + std::to_string(bytes.size()) + " bytes (" +
                                human_bytes(bytes.size()) +
                                "), alignment 64, data section at offset " +
                                std::to_string(f.data_offset()));
  EXPECT_TRUE(has_line(text, "metadata: 4 keys")) << text;
  EXPECT_TRUE(
      has_line(text, "  ids                      array[int32]  [0, 1, 2, ... (1000 total)]"))
      << text;
  EXPECT_TRUE(has_line(text, "  general.name             string        \"tiny\"")) << text;
  EXPECT_TRUE(
      has_line(text, "  tokenizer.chat_template  string        \"xxxxxxxxxx\"... (500 bytes)"))
      << text;
  EXPECT_TRUE(has_line(text, "  general.alignment        uint32        64")) << text;
  EXPECT_TRUE(has_line(text, "tensors: 3")) << text;
  EXPECT_TRUE(has_line(text, "  name      type  shape   offset  bytes")) << text;
  EXPECT_TRUE(has_line(text, "  a.weight  f32   8 x 4        0    128")) << text;
  EXPECT_TRUE(has_line(text, "  b.weight  q8_0  64 x 3     128    204")) << text;
  EXPECT_TRUE(has_line(text, "  c.weight  f32   16         384     64")) << text;
  EXPECT_TRUE(has_line(text, "totals by type:")) << text;
  EXPECT_TRUE(has_line(text, "  f32         2        48    192  192 B")) << text;
  EXPECT_TRUE(has_line(text, "  q8_0        1       192    204  204 B")) << text;
  EXPECT_TRUE(has_line(text, "  all         3       240    396  396 B")) << text;

  opt.show_metadata = false;
  opt.show_tensors = false;
  const std::string brief = describe(f, opt);
  EXPECT_EQ(brief.find("general.name"), std::string::npos);
  EXPECT_EQ(brief.find("a.weight"), std::string::npos);
  EXPECT_NE(brief.find("totals by type:"), std::string::npos);
}

TEST(GgufInspect, HumanBytes) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(1023), "1023 B");
  EXPECT_EQ(human_bytes(1536), "1.50 KiB");
  EXPECT_EQ(human_bytes(3ull << 30), "3.00 GiB");
}

TEST(GgufInspect, Stories260K) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  const std::string text = describe(GgufFile::open(path));
  EXPECT_NE(text.find("GGUF version 3, 1185376 bytes"), std::string::npos) << text;
  EXPECT_TRUE(has_line(text, "tensors: 48"));
  EXPECT_NE(text.find("\"<unk>\", \"<s>\", \"</s>\""), std::string::npos);
  EXPECT_NE(text.find("(512 total)"), std::string::npos);
  bool found_embd = false;
  for (const auto& l : lines(text))
    if (l.find("token_embd.weight") != std::string::npos) {
      found_embd = true;
      EXPECT_NE(l.find("f32"), std::string::npos);
      EXPECT_NE(l.find("64 x 512"), std::string::npos);
      EXPECT_NE(l.find("131072"), std::string::npos);
    }
  EXPECT_TRUE(found_embd);
  // 292800 f32 parameters.
  EXPECT_NE(text.find("292800  1171200"), std::string::npos) << text;
}

}  // namespace
}  // namespace tkv::gguf
