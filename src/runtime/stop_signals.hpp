// SIGTERM, SIGUSR1 and SIGINT ask a run to stop: the driver finishes the step, writes a
// checkpoint and exits with kExitStoppedEarly (SLURM sends these before it kills a job). A second
// SIGINT kills at once, as a user pressing Ctrl-C twice expects.
#pragma once

namespace apron {

inline constexpr int kExitStoppedEarly = 3;  // stopped before the end, with a checkpoint

void install_stop_signals();
// The signal that asked this process to stop, or 0. Async-signal-safe state, read each step.
int stop_signal();

}  // namespace apron
