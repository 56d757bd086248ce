#include "bench/interrupt.h"

namespace tkv::bench {

namespace {

volatile std::sig_atomic_t g_signal = 0;

void record_signal(int sig) {
  if (g_signal == 0) g_signal = sig;
}

}  // namespace

InterruptScope::InterruptScope() {
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = record_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked poll() returns EINTR and looks at the flag
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

InterruptScope::~InterruptScope() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

int interrupt_signal() {
  return g_signal;
}

const char* interrupt_signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return "a signal";
}

}  // namespace tkv::bench
