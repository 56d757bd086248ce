// `turbokv bench`: the benchmark protocols (src/bench). bench_cli.h declares
// its flags with the shared flag groups (src/cli); --kv, --ctx and --threads
// take lists there. Each measurement re-runs this binary as
// `turbokv bench cell --request JSON` in a child process.
#include <span>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "command_registry.h"

namespace tkv::cli {
namespace {

int bench_command(std::span<const std::string> args) {
  return bench::bench_main(std::vector<std::string>(args.begin(), args.end()));
}

}  // namespace
}  // namespace tkv::cli

TKV_REGISTER_COMMAND(bench, "benchmarks: memory, speed, recall, quality, kernel, all",
                     tkv::cli::bench_command);
