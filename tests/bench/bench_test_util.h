// Helpers for the bench tests: running the bench driver as a child process,
// a small English text file for quality runs on stories260K, and the cell
// requests the protocols send.
#pragma once

#include <string>
#include <vector>

#include "bench/child_process.h"
#include "bench/json.h"
#include "bench/kv_configs.h"

namespace tkv::bench::test {

// Runs `tkv_bench_driver bench ARGS...` (TKV_BENCH_DRIVER) and returns the result.
ChildResult run_bench(const std::vector<std::string>& args);

// Writes a few KB of simple story text (vocabulary stories260K knows) to
// `dir`/stories.txt and returns its path.
std::string write_story_text(const std::string& dir, int paragraphs = 40);

// A cell request for `protocol` on `model` with one KV configuration.
Json cell_request(const std::string& protocol, const std::string& model, const std::string& kv,
                  int threads = 1);

Json read_json_file(const std::string& path);
std::string read_text_file(const std::string& path);

}  // namespace tkv::bench::test
