// Executing a planned bench run: the cells of every section in order, each
// in its own child process. report.json and report.md are written before the
// first cell (an unwritable --out fails before any work) and rewritten
// atomically after every cell, with the cells still to come marked "not
// run", so a run that is killed keeps every finished cell. On SIGINT or
// SIGTERM the running cell is stopped, the report is finished with what
// completed (the rest marked "not run") and the run exits 128 + the signal.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/cell.h"
#include "bench/json.h"
#include "bench/plan.h"

namespace tkv::bench {

// Exit status of a bench run (docs/BENCHMARKS.md, "Exit status"):
//   0  every cell gave a result: ok, or a limit it reached ("oom" under
//      --mem-limit or the machine's memory, "timeout" under --cell-timeout)
//   1  at least one cell failed (an error or a crash; its row says why)
//   2  bad input (flags, files), before any cell ran
//   130 / 143  interrupted by SIGINT / SIGTERM (128 + the signal)
inline constexpr int kExitCellFailed = 1;

struct Section {
  std::string name;  // "memory", "speed", "recall", "quality", "kernel"
  std::vector<PlannedCell> cells;
  std::function<Json(std::vector<Json>)> summarize;
};

// Runs the sections; `report` is the header (make_report()). Prints each
// section's tables on stdout at the end and writes the report files to
// `out_dir` ("" = none). Returns the exit status above.
int execute_run(const std::vector<Section>& sections, CellRunner& runner, const Json& report,
                const std::string& out_dir, bool quiet);

// True when a row of the section failed (status "failed").
bool any_cell_failed(const Json& section);

}  // namespace tkv::bench
