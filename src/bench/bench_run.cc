#include "bench/bench_run.h"

#include <cstdio>
#include <iostream>

#include "bench/interrupt.h"
#include "bench/progress.h"
#include "bench/report.h"
#include "common/error.h"

namespace tkv::bench {

bool any_cell_failed(const Json& section) {
  for (const char* list : {"rows", "multi_turn"}) {
    if (!section.contains(list)) continue;
    for (const auto& r : section[list])
      if (r.value("status", std::string()) == "failed") return true;
  }
  return false;
}

int execute_run(const std::vector<Section>& sections, CellRunner& runner, const Json& report,
                const std::string& out_dir, bool quiet) {
  std::vector<std::vector<Json>> rows(sections.size());
  double cost = 0;
  int total = 0, finished = 0;
  for (const auto& s : sections) {
    cost += total_cost(s.cells);
    total += int(s.cells.size());
  }
  // The report as it stands: finished rows, then the cells without a result.
  auto current = [&](const std::string& state, const std::string& not_run_reason) {
    Json r = report;
    r["run"] = {{"state", state}, {"cells", total}, {"cells_finished", finished}};
    for (size_t i = 0; i < sections.size(); ++i) {
      std::vector<Json> all = rows[i];
      for (size_t c = all.size(); c < sections[i].cells.size(); ++c)
        all.push_back(not_run_row(sections[i].cells[c], not_run_reason));
      r[sections[i].name] = sections[i].summarize(std::move(all));
    }
    return r;
  };
  auto save = [&](const Json& r) {
    return out_dir.empty() ? std::string() : write_report(r, out_dir);
  };

  InterruptScope interrupts;
  save(current("running", "not run yet"));
  {
    Progress progress(cost, total, !quiet);
    for (size_t i = 0; i < sections.size(); ++i) {
      const bool all_ran = execute_cells(sections[i].cells, runner, progress, rows[i], [&] {
        ++finished;
        save(current("running", "not run yet"));
      });
      if (!all_ran) break;
    }
  }
  const int sig = interrupt_signal();
  const Json final_report =
      sig ? current("interrupted", str("interrupted by ", interrupt_signal_name(sig)))
          : current("complete", "");
  for (const auto& s : sections)
    std::cout << "\n## " << s.name << "\n\n" << section_markdown(s.name, final_report[s.name]);
  std::cout.flush();
  if (!out_dir.empty()) std::fprintf(stderr, "bench: %s\n", save(final_report).c_str());
  if (sig) {
    std::fprintf(stderr, "bench: interrupted by %s after %d of %d cells; the rest are marked %s\n",
                 interrupt_signal_name(sig), finished, total, kNotRun);
    return 128 + sig;
  }
  for (const auto& s : sections)
    if (any_cell_failed(final_report[s.name])) return kExitCellFailed;
  return 0;
}

}  // namespace tkv::bench
