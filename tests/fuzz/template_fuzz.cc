// The template interpreter: arbitrary bytes as a chat template, parsed and,
// when that works, rendered with a conversation. A syntax or render error
// is the expected outcome of garbage; the limits (steps, output, depth) are
// small so that a template that loops or recurses ends fast with an error.
// Input: template source, then optionally a 0 byte and the variables as a
// JSON object (a default conversation when absent or not valid JSON).
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "fuzz_target.h"
#include "template/template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t cut = in.find('\0');
  const std::string_view source = in.substr(0, cut);
  using json = nlohmann::ordered_json;
  json vars =
      json::parse(cut == std::string_view::npos ? std::string_view() : in.substr(cut + 1), nullptr,
                  /*allow_exceptions=*/false);
  if (!vars.is_object())
    vars = json{{"messages", json::array({{{"role", "system"}, {"content", "Be terse."}},
                                          {{"role", "user"}, {"content", "Hi \xc3\xa9"}}})},
                {"add_generation_prompt", true},
                {"bos_token", "<s>"},
                {"eos_token", "</s>"}};
  tkv::tmpl::RenderOptions options;
  options.limits.max_steps = 20000;
  options.limits.max_output_bytes = 1 << 16;
  std::tm tm{};
  options.now = tm;
  try {
    const tkv::tmpl::Template t = tkv::tmpl::Template::parse(source, "fuzz");
    (void)t.render(vars, options);
  } catch (const tkv::Error&) {
  }
  return 0;
}
