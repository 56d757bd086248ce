// Test stand-in for the turbokv binary's bench command: the same library
// entry point behind the same argv shape ("bench memory ...", "bench cell
// --request ..."), and the same error convention (tkv::Error -> one line
// "turbokv: error: ...", exit 2), so the harness tests can run child-process
// cells whatever state the full CLI is in.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "common/error.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty() || args[0] != "bench") tkv::fail("usage: tkv_bench_driver bench ...");
    return tkv::bench::bench_main(std::vector<std::string>(args.begin() + 1, args.end()));
  } catch (const tkv::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "turbokv: error: %s\n", e.what());
    return 2;
  }
}
