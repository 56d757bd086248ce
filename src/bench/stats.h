// Small statistics over samples (timings, KL values): median, min, max,
// mean, percentiles -- computed on a copy, samples kept in order for reports.
#pragma once

#include <vector>

#include "bench/json.h"

namespace tkv::bench {

struct Summary {
  double median = 0, min = 0, max = 0, mean = 0;
  size_t n = 0;
};
Summary summarize(const std::vector<double>& samples);
// Linear interpolation between order statistics; q in [0, 1].
double percentile(std::vector<double> samples, double q);
Json to_json(const Summary& s);

}  // namespace tkv::bench
