// `turbokv inspect`: a GGUF file's metadata and tensor table, plus a model
// summary (shapes, parameters, KV bytes per token) when it is a model.
#include <cstdio>
#include <limits>
#include <span>
#include <string>

#include "cli/flags.h"
#include "command_registry.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/inspect.h"
#include "model_summary.h"
#include "output.h"

namespace tkv::cli {
namespace {

int inspect_main(std::span<const std::string> args) {
  std::string path, model_flag;
  bool all = false, model_only = false;
  FlagParser flags("inspect", "turbokv inspect MODEL [--all] [--model-only]",
                   "Prints a GGUF file's header, metadata and tensor table, then (for a model\n"
                   "turbokv can run) its architecture, per-layer shapes and KV bytes per token.");
  flags.add_positional("MODEL", "a GGUF file (model, vocabulary or turbokv session)", &path,
                       /*required=*/false);
  flags.add_string({"-m", "--model"}, "FILE", "the GGUF file, as the other commands take it",
                   &model_flag);
  flags.add_bool({"--all"}, "show long arrays and strings (chat templates) in full", &all);
  flags.add_bool({"--model-only"}, "only the model summary, no metadata or tensor table",
                 &model_only);
  if (!flags.parse(args)) return 0;
  if (!path.empty() && !model_flag.empty() && path != model_flag)
    fail("inspect: two files given (", path, " and -m ", model_flag, "): inspect takes one");
  if (path.empty()) path = model_flag;
  if (path.empty()) fail("inspect: no file given (turbokv inspect MODEL, or -m MODEL)");

  const gguf::GgufFile file = gguf::GgufFile::open(path);
  std::string out;
  if (!model_only) {
    gguf::InspectOptions options;
    if (all) {
      options.max_array_elems = std::numeric_limits<size_t>::max();
      options.max_string_bytes = std::numeric_limits<size_t>::max();
    }
    out = gguf::describe(file, options);
    if (!out.empty() && out.back() != '\n') out += '\n';
    out += '\n';
  }
  write_stdout(out);

  std::string summary;
  try {
    summary = describe_model(file);
  } catch (const Error& e) {
    if (model_only) throw;
    // Vocabulary and session files are fine to inspect; say why there is no
    // model section rather than failing.
    summary = str("model: none (", e.what(), ")\n", experts_line(file));
  }
  write_stdout(summary);
  return 0;
}

}  // namespace
}  // namespace tkv::cli

TKV_REGISTER_COMMAND(inspect, "show a GGUF file's metadata, tensors and model shapes",
                     tkv::cli::inspect_main);
