#include "bench_test_util.h"

#include <fstream>
#include <sstream>

#include "common/atomic_file.h"

namespace tkv::bench::test {

ChildResult run_bench(const std::vector<std::string>& args) {
#ifdef TKV_BENCH_DRIVER
  std::vector<std::string> argv{TKV_BENCH_DRIVER, "bench"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_child(argv, {});
#else
  (void)args;
  return {};
#endif
}

std::string write_story_text(const std::string& dir, int paragraphs) {
  static const char* kSentences[] = {
      "Once upon a time, there was a little girl named Lily.",
      "She liked to play in the park with her friend Tom.",
      "One day, they saw a big red ball under a tree.",
      "Tom said, \"Let's play with the ball!\"",
      "Lily was happy and they played all day.",
      "Then the sun went down and it was time to go home.",
      "Mom gave them a warm hug and a cookie.",
      "The cat jumped on the bed and went to sleep.",
  };
  std::string text;
  for (int p = 0; p < paragraphs; ++p) {
    for (int s = 0; s < 6; ++s) text += std::string(kSentences[(p * 3 + s * 5) % 8]) + " ";
    text += "\n";
  }
  const std::string path = dir + "/stories.txt";
  write_file_atomic(path, text);
  return path;
}

Json cell_request(const std::string& protocol, const std::string& model, const std::string& kv,
                  int threads) {
  return {{"protocol", protocol},
          {"model", model},
          {"threads", threads},
          {"ubatch", 64},
          {"kv", bench_kv_to_json(parse_bench_kv_list(kv).front())}};
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Json read_json_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());
}

}  // namespace tkv::bench::test
