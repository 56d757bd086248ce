// embed MODEL PROMPT N: prints PROMPT and its greedy continuation of N
// tokens, the text `turbokv run -m MODEL -p PROMPT -n N --temp 0` prints.
#include <turbokv/turbokv.hpp>

#include <cstdio>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: embed MODEL PROMPT N\n");
    return 2;
  }
  try {
    turbokv::Engine engine(argv[1]);
    const std::vector<int32_t> prompt = engine.tokenize(argv[2], /*add_bos=*/true);
    std::cout << engine.detokenize(prompt);  // as `turbokv run` echoes it
    turbokv::Sequence seq = engine.new_sequence();
    seq.eval(prompt);
    turbokv::GenerateParams params;
    params.max_tokens = std::stoll(argv[3]);
    params.sampling.temperature = 0;  // greedy
    const turbokv::GenerateResult r = seq.generate(params, [](std::string_view text) {
      std::cout << text;
      return bool(std::cout);
    });
    if (r.n_generated > 0) std::cout << '\n';
    std::cout.flush();
    return std::cout ? 0 : 1;
  } catch (const turbokv::Error& e) {
    std::fprintf(stderr, "embed: %s\n", e.what());
    return 1;
  }
}
