#include "bench/plan.h"

#include "bench/interrupt.h"

namespace tkv::bench {

Json not_run_row(const PlannedCell& cell, const std::string& reason) {
  Json row = cell.identity;
  row["status"] = kNotRun;
  row["reason"] = reason;
  return row;
}

bool execute_cells(const std::vector<PlannedCell>& cells, CellRunner& runner, Progress& progress,
                   std::vector<Json>& rows, const std::function<void()>& after_cell) {
  for (const auto& cell : cells) {
    if (interrupt_signal() != 0) return false;
    progress.begin_cell(cell.label);
    const Json result = runner.run(cell.request);
    // A cell the signal reached too (Ctrl-C goes to the whole process group)
    // did not finish: only a result it completed counts.
    if (interrupt_signal() != 0 && !result_ok(result)) return false;
    Json row = cell.identity;
    for (auto it = result.begin(); it != result.end(); ++it) row[it.key()] = it.value();
    rows.push_back(std::move(row));
    progress.end_cell(cell.cost);
    if (after_cell) after_cell();
  }
  return true;
}

double total_cost(const std::vector<PlannedCell>& cells) {
  double total = 0;
  for (const auto& c : cells) total += c.cost;
  return total;
}

}  // namespace tkv::bench
