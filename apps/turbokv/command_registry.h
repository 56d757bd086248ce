// The subcommands of the turbokv binary register themselves, so adding one is
// adding a cmd_<name>.cc file (the CMakeLists globs them) with:
//
//   namespace { int bench_main(std::span<const std::string> args) { ... } }
//   TKV_REGISTER_COMMAND(bench, "benchmarks: memory, speed, recall, quality", bench_main);
//
// `args` are the arguments after the subcommand name. A command returns its
// exit code; it throws tkv::Error for anything the user got wrong (main()
// prints "turbokv: error: <message>" and exits 2).
#pragma once

#include <span>
#include <string>
#include <vector>

namespace tkv::cli {

using CommandMain = int (*)(std::span<const std::string> args);

struct Command {
  std::string name;
  std::string summary;  // one line, for `turbokv --help`
  CommandMain main;
};

// Adds a command (called from static initializers; the order of calls does
// not matter, listings are sorted by name). A duplicate name aborts: it is a
// programming error caught by any run of the binary.
bool register_command(const char* name, const char* summary, CommandMain main);

// Every registered command, sorted by name.
std::vector<Command> commands();
// The command called `name`, or nullptr.
const Command* find_command(const std::string& name);

}  // namespace tkv::cli

#define TKV_REGISTER_COMMAND(name, summary, fn)                      \
  [[maybe_unused]] static const bool tkv_registered_command_##name = \
      ::tkv::cli::register_command(#name, summary, fn)
