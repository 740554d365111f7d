#include "runtime/stop_signals.hpp"

#include <csignal>
#include <initializer_list>

namespace apron {
namespace {

volatile std::sig_atomic_t requested = 0;

extern "C" void on_stop_signal(int signal) {
  requested = signal;
  if (signal == SIGINT) std::signal(SIGINT, SIG_DFL);
}

}  // namespace

void install_stop_signals() {
  for (const int s : {SIGTERM, SIGUSR1, SIGINT}) std::signal(s, on_stop_signal);
}

int stop_signal() {
  return requested;
}

}  // namespace apron
