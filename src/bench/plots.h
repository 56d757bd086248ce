// PNG plots of a report, drawn by gnuplot (Debian package gnuplot-nox):
// for each plot a data file and a .gp script are written next to the
// report (so a plot can be re-drawn or restyled by hand), then gnuplot runs
// the script. Plots: memory vs context per configuration, decode ms/token vs
// depth per configuration, the recall heat map (depth x configuration), and
// decode-attention time vs depth per configuration for each head_dim.
#pragma once

#include <string>
#include <vector>

#include "bench/json.h"

namespace tkv::bench {

struct PlotResult {
  std::vector<std::string> written;  // PNG paths produced
  std::string skipped;               // why plots were not drawn ("" when they were)
};

// `report` is the report.json object; files go to `dir`.
PlotResult write_plots(const Json& report, const std::string& dir);

// Full path of an executable found in $PATH, or "".
std::string find_in_path(const std::string& name);

}  // namespace tkv::bench
