// turbokv: one binary, many subcommands (see command_registry.h).
//
// Exit codes: 0 success; 2 the user's input was wrong (bad flag, missing or
// corrupt file, unknown codec, over-long prompt: a tkv::Error); 1 anything
// unexpected (a bug or the machine: out of memory, standard output that
// cannot be written).
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "command_registry.h"
#include "common/error.h"
#include "output.h"

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
    tkv::cli::write_stdout(std::string("turbokv ") + TURBOKV_VERSION + "\n");
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
  if (!cmd) {
    std::vector<std::string> names;
    for (const tkv::cli::Command& c : tkv::cli::commands()) names.push_back(c.name);
    const std::string near = tkv::cli::closest_name(name, names);
    if (!near.empty())
      tkv::fail("unknown command '", name, "' (did you mean ", near,
                "? run `turbokv --help` for the list)");
    tkv::fail("unknown command '", name, "' (run `turbokv --help` for the list)");
  }
  return cmd->main(args);
}

// Before a message on stderr: what stdout holds is out, and a line the
// generated text left open is ended, so the message starts a line.
void end_output() {
  try {
    tkv::cli::end_stdout_line();
  } catch (const tkv::cli::StdoutError&) {
    // Reported already, or stdout is gone: the message still goes to stderr.
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int rc = dispatch(argc, argv);
    tkv::cli::flush_stdout();  // help, tables: anything still buffered
    return rc;
  } catch (const tkv::cli::StdoutError& e) {
    std::fprintf(stderr, "turbokv: error: %s\n", e.what());
    return 1;
  } catch (const tkv::Error& e) {
    end_output();
    std::fprintf(stderr, "turbokv: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    end_output();
    std::fputs("turbokv: error: out of memory\n", stderr);
    return 1;
  } catch (const std::exception& e) {
    end_output();
    std::fprintf(stderr, "turbokv: unexpected error: %s\n", e.what());
    return 1;
  } catch (...) {
    end_output();
    std::fputs("turbokv: unexpected error of unknown type\n", stderr);
    return 1;
  }
}
