// A bench run is planned first (every cell of every protocol, with a cost
// estimate, so the progress bar can say how long is left), then executed
// cell by cell in child processes. A row of the report is the cell's
// identity (which configuration, context, threads, ...) followed by its result.
#pragma once

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

// Runs the cells in order; returns one row per cell.
std::vector<Json> execute_cells(const std::vector<PlannedCell>& cells, CellRunner& runner,
                                Progress& progress);

double total_cost(const std::vector<PlannedCell>& cells);

}  // namespace tkv::bench
