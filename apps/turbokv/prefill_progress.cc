#include "prefill_progress.h"

#include <unistd.h>

#include <memory>

#include "bench/progress.h"

namespace tkv::cli {

runtime::PrefillObserver prefill_progress_bar(PrefillProgress mode) {
  if (mode == PrefillProgress::kOff) return {};
  const bool always = mode == PrefillProgress::kAlways;
  return [always](int64_t total) -> std::function<void(int64_t)> {
    auto bar = std::make_shared<bench::Progress>(
        bench::Progress::Units{.what = "prefill",
                               .unit = "tok",
                               .total = double(total),
                               .delay_seconds = always ? 0.0 : 1.0},
        always || ::isatty(STDERR_FILENO) == 1);
    return [bar, shown = int64_t(0)](int64_t done) mutable {
      bar->add(double(done - shown));
      shown = done;
    };
  };
}

}  // namespace tkv::cli
