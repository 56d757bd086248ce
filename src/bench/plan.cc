#include "bench/plan.h"

namespace tkv::bench {

std::vector<Json> execute_cells(const std::vector<PlannedCell>& cells, CellRunner& runner,
                                Progress& progress) {
  std::vector<Json> rows;
  rows.reserve(cells.size());
  for (const auto& cell : cells) {
    progress.begin_cell(cell.label);
    Json row = cell.identity;
    const Json result = runner.run(cell.request);
    for (auto it = result.begin(); it != result.end(); ++it) row[it.key()] = it.value();
    rows.push_back(std::move(row));
    progress.end_cell(cell.cost);
  }
  return rows;
}

double total_cost(const std::vector<PlannedCell>& cells) {
  double total = 0;
  for (const auto& c : cells) total += c.cost;
  return total;
}

}  // namespace tkv::bench
