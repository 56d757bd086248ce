// turbokv: one binary, many subcommands (see command_registry.h).
//
// Exit codes: 0 success; 2 the user's input was wrong (bad flag, missing or
// corrupt file, unknown codec, over-long prompt: a tkv::Error); 1 anything
// unexpected (a bug or the machine, e.g. out of memory).
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "command_registry.h"
#include "common/error.h"

namespace {

std::string top_level_help() {
  std::string out =
      "usage: turbokv COMMAND [flags]\n"
      "\n"
      "LLM inference on GGUF llama-family models with a KV cache that stays\n"
      "compressed while attention reads it.\n"
      "\n"
      "commands:\n";
  for (const auto& c : tkv::cli::commands()) {
    std::string name = "  " + c.name;
    name.resize(16, ' ');
    out += name + c.summary + "\n";
  }
  out +=
      "\n"
      "`turbokv COMMAND --help` shows a command's flags; docs/CLI.md has examples.\n";
  return out;
}

int dispatch(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(top_level_help().c_str(), stderr);
    std::fputs("turbokv: error: no command given\n", stderr);
    return 2;
  }
  std::string name = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (name == "-h" || name == "--help") {
    std::fputs(top_level_help().c_str(), stdout);
    return 0;
  }
  if (name == "--version" || name == "version") {
    std::printf("turbokv %s\n", TURBOKV_VERSION);
    return 0;
  }
  if (name == "help") {  // `turbokv help run` == `turbokv run --help`
    if (args.empty()) {
      std::fputs(top_level_help().c_str(), stdout);
      return 0;
    }
    name = args[0];
    args = {"--help"};
  }
  const tkv::cli::Command* cmd = tkv::cli::find_command(name);
  if (!cmd) tkv::fail("unknown command '", name, "' (run `turbokv --help` for the list)");
  return cmd->main(args);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (const tkv::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "turbokv: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    std::fputs("turbokv: error: out of memory\n", stderr);
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "turbokv: unexpected error: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fflush(stdout);
    std::fputs("turbokv: unexpected error of unknown type\n", stderr);
    return 1;
  }
}
