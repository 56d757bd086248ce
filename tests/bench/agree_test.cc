// bench agree: what counts as a clear step and an agreement, its report
// section, and its refusals of bad flags (the comparison itself needs a
// llama.cpp build: scripts and docs/results run it).
#include "bench/agree.h"

#include <gtest/gtest.h>

#include "bench/report.h"
#include "common/error.h"

namespace tkv::bench {
namespace {

AgreeStep step(bool known, int llama, double margin, int turbokv, double clear_at) {
  AgreeStep s;
  s.llama_known = known;
  s.llama_token = llama;
  s.llama_margin = margin;
  s.turbokv_token = turbokv;
  s.clear = known && margin >= clear_at;
  return s;
}

TEST(BenchAgree, CountsOnlyClearStepsAndTheirAgreements) {
  const std::vector<AgreeStep> steps = {
      step(true, 5, 0.5, 5, 0.05),    // clear, equal
      step(true, 7, 0.01, 8, 0.05),   // near tie: not counted
      step(true, 9, 0.30, 3, 0.05),   // clear, differs
      step(false, 0, -1.0, 4, 0.05),  // llama.cpp gave no token
  };
  Json section = agree_summary(steps, 0.05);
  EXPECT_EQ(section["summary"]["steps"], 4);
  EXPECT_EQ(section["summary"]["clear"], 2);
  EXPECT_EQ(section["summary"]["agree"], 1);
  section["weights"] = "quantized";
  const std::string md = section_markdown("agree", section);
  EXPECT_NE(md.find("clear (llama.cpp's top-2 margin >= 0.05): 2"), std::string::npos) << md;
  EXPECT_NE(md.find("**differs**"), std::string::npos) << md;
  EXPECT_NE(md.find("near tie"), std::string::npos) << md;
  EXPECT_NE(md.find("llama.cpp: no token"), std::string::npos) << md;
}

TEST(BenchAgree, RefusesMissingFlagsInOneLine) {
  const auto error_of = [](std::vector<std::string> args) {
    try {
      agree_main(args);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_of({"--llama-bin", "/nonexistent"}), "bench agree: -m MODEL is required");
  EXPECT_EQ(error_of({"-m", "x.gguf"}), "bench agree: --llama-bin DIR is required");
  EXPECT_NE(error_of({"-m", "x.gguf", "--llama-bin", "d", "--margin", "-1"}).find("--margin"),
            std::string::npos);
}

}  // namespace
}  // namespace tkv::bench
