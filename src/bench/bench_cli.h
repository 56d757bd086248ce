// The `turbokv bench` command; apps/turbokv/cmd_bench.cc forwards its
// arguments here.
//
//   turbokv bench memory|speed|recall|quality|kernel|all [flags]
//   turbokv bench cell --request JSON        (internal: one measurement)
//
// The flags are declared on the CLI's parser with its shared groups (model,
// -ub, the KV flags in their list form); --kv, --ctx and --threads take
// lists here.
// Bad input throws tkv::Error (the binary prints it, exit 2). Returns 0, or
// 1 when a cell failed (not for OOM rows: those are results).
#pragma once

#include <string>
#include <vector>

namespace tkv::bench {

// args: the arguments after "bench" (subcommand first). cell_argv: how to
// run this binary's "bench cell" (e.g. {"/path/turbokv", "bench", "cell"});
// empty = {self_executable(), "bench", "cell"}.
int bench_main(const std::vector<std::string>& args, std::vector<std::string> cell_argv = {});

}  // namespace tkv::bench
