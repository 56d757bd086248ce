// `turbokv template` through the binary: the exact rendering of a
// conversation with a model's template, a built-in or a file; its errors.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cli_runner.h"
#include "test_util.h"

namespace tkv::test {
namespace {

std::string write(const std::string& name, const std::string& text) {
  const std::string path = temp_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(CliTemplate, PrintsTheModelsRenderingExactly) {
  TKV_REQUIRE_FIXTURE(vocab, "vocab/ggml-vocab-qwen2.gguf");
  const std::string conv =
      write("conv.json", R"({"messages": [{"role": "user", "content": "Hi"}]})");
  const CliResult r = run_cli({"template", "-m", vocab, "--messages", conv});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Qwen2's template adds its default system prompt; no newline is added.
  EXPECT_EQ(
      r.out,
      "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
      "<|im_start|>assistant\n");
  // The messages alone as an array (the generation prompt on by default),
  // or add_generation_prompt from the file.
  const std::string plain = write("plain.json", R"([{"role": "user", "content": "Hi"}])");
  CliResult r2 = run_cli({"template", "--chat-template", "chatml", "--messages", plain});
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_EQ(r2.out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const std::string off =
      write("off.json",
            R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": false})");
  r2 = run_cli({"template", "--chat-template", "chatml", "--messages", off});
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_EQ(r2.out, "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(CliTemplate, AFileTemplateSeesEveryVariable) {
  const std::string tmpl =
      write("t.jinja",
            "{{ bos_token }}{% for t in tools %}[{{ t.name }}]{% endfor %}"
            "{{ messages[0].content | upper }}{% if not enable_thinking %}/nothink{% endif %}\n");
  const std::string conv = write(
      "conv.json",
      R"({"messages": [{"role": "user", "content": "q"}], "tools": [{"name": "f"}], "enable_thinking": false, "bos_token": "<s>"})");
  const CliResult r = run_cli({"template", "--chat-template", tmpl, "--messages", conv});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<s>[f]Q/nothink");
}

TEST(CliTemplate, ErrorsAreOneLine) {
  const std::string conv =
      write("conv.json", R"({"messages": [{"role": "user", "content": "q"}]})");
  const std::string bad = write("bad.jinja", "ok\n{% if x %}\n{{ 1 + }}\n{% endif %}");
  CliResult r = run_cli({"template", "--chat-template", bad, "--messages", conv});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "turbokv: error: chat template " + bad + " line 3: expected an expression, got '}}'\n");
  const std::string raises = write("raise.jinja", "{{ raise_exception('Only user turns') }}");
  r = run_cli({"template", "--chat-template", raises, "--messages", conv});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "turbokv: error: chat template " + raises + " line 1: Only user turns\n");
  r = run_cli({"template", "--chat-template", "chatml", "--messages", write("x.json", "{nope")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;
  r = run_cli({"template", "--messages", conv});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("give a model (-m MODEL.gguf) or a template"), std::string::npos) << r.err;
}

TEST(CliTemplate, AModelWithoutATemplateNamesTheFlag) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string conv =
      write("conv.json", R"({"messages": [{"role": "user", "content": "q"}]})");
  const CliResult r = run_cli({"template", "-m", model, "--messages", conv});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pass --chat-template"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tkv::test
