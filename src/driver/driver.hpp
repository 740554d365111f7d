// The driver loop (ARCHITECTURE.md, "A run"): step, outputs, progress line, stop conditions, and
// at the end the phase-timing summary and the JSON run report.
#pragma once

#include "config/case_config.hpp"
#include "runtime/runtime.hpp"

namespace apron {

// Runs the case to its end; returns the process exit status.
int run_case(const config::CaseConfig& config, const RankInfo& ranks, const DeviceInfo& device);

}  // namespace apron
