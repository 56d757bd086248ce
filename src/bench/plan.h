// A bench run is planned first (every cell of every protocol, with a cost
// estimate, so the progress bar can say how long is left), then executed
// cell by cell in child processes. A row of the report is the cell's
// identity (which configuration, context, threads, ...) followed by its result.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/cell.h"
#include "bench/json.h"
#include "bench/progress.h"

namespace tkv::bench {

struct PlannedCell {
  std::string label;  // for the progress line: "memory k4v2 ctx 8K"
  double cost = 1;    // relative work estimate (about the flops of the cell)
  Json identity;      // copied to the front of the row
  Json request;       // what the child runs
};

// The row of a cell without a result: its identity, "status": "not run"
// and `reason`.
Json not_run_row(const PlannedCell& cell, const std::string& reason);

// Runs the cells in order, appending one row per cell that finished to
// `rows` and calling after_cell() after each. Stops when the run is
// interrupted (interrupt.h): the cell cut short gets no row. Returns false
// when it stopped early.
bool execute_cells(const std::vector<PlannedCell>& cells, CellRunner& runner, Progress& progress,
                   std::vector<Json>& rows, const std::function<void()>& after_cell);

double total_cost(const std::vector<PlannedCell>& cells);

}  // namespace tkv::bench
