// Ctrl-C (SIGINT) and SIGTERM during a bench run. While an InterruptScope is
// alive the two signals only record themselves (the handler is
// async-signal-safe); run_child() polls interrupt_signal() and kills the cell
// it runs (ChildLimits::stop_on_interrupt), and the harness then finishes the
// report with the cells that completed and exits 128 + the signal.
#pragma once

#include <csignal>

namespace tkv::bench {

class InterruptScope {
 public:
  InterruptScope();   // installs the handlers (and clears a signal recorded before)
  ~InterruptScope();  // restores the previous dispositions
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

// 0, or the first SIGINT / SIGTERM received inside an InterruptScope.
int interrupt_signal();

// "SIGINT", "SIGTERM" (anything else: "a signal").
const char* interrupt_signal_name(int sig);

}  // namespace tkv::bench
