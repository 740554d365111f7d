// The driver loop (ARCHITECTURE.md, "A run"): step, outputs, progress line, stop conditions, and
// at the end the phase-timing summary and the JSON run report.
#pragma once

#include "config/case_config.hpp"
#include "runtime/runtime.hpp"

namespace apron {

struct RunOptions {
  // "": start from the case's initial state; "latest": the newest checkpoint in output.dir (an
  // error if there is none); "auto": the newest if there is one, else the initial state (for
  // batch scripts that are requeued); anything else: a checkpoint file.
  std::string restart;
  double max_wall_seconds = 0;  // > 0: stop with a checkpoint before this much wall time
};

// Runs the case to its end, or until a stop signal or the wall-time limit; returns the process
// exit status (0, or kExitStoppedEarly after writing a checkpoint).
int run_case(const config::CaseConfig& config, const RankInfo& ranks, const DeviceInfo& device,
             const RunOptions& options = {});

}  // namespace apron
