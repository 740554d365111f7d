// The typed configuration of a run, parsed and validated from YAML before anything is allocated:
// the sections every workload shares, parsed here once, and the workload's own sections, parsed
// by the schema it registered (config/workload_schema.hpp). config/ knows no physics.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "config/workload_schema.hpp"
#include "kernels/common/box.hpp"

namespace apron::config {

using Vec3d = std::array<double, 3>;

struct TimeConfig {
  double end = 0;
  long max_steps = 0;  // 0: no limit
  // Whether a time-stepping run is done: its end reached (within round-off of the sum of the
  // steps), or max_steps taken.
  bool reached(long step, double time) const {
    return time >= end * (1 - 1e-12) || (max_steps > 0 && step >= max_steps);
  }
};

struct OutputConfig {
  std::string dir = "out";
  double every = 0;             // simulated seconds between particle outputs; 0: none
  long diagnostics_every = 10;  // steps between diagnostics rows
  double progress_every = 2.0;  // wall-clock seconds between progress lines
};

struct DecompositionConfig {
  std::string method = "rcb";  // cartesian | rcb
  std::array<int, 3> dims{0, 0, 0};
  double rebalance_threshold = 1.2;  // re-partition when max/mean particle count exceeds this
  long rebalance_check_every = 50;   // steps
};

// When checkpoints are written (any trigger that is due writes one). A run stopped by SIGTERM or
// SIGUSR1, or by --max-wall-time, always writes one before it exits.
struct CheckpointConfig {
  long every_steps = 0;           // 0: not by step count
  double every_time = 0;          // simulated seconds; 0: not by simulated time
  double every_wall_minutes = 0;  // wall-clock minutes; 0: not by wall clock
  int keep = 3;                   // the newest `keep` checkpoints are kept, older ones deleted
  bool at_end = true;             // one when the run reaches its end
  bool periodic() const { return every_steps > 0 || every_time > 0 || every_wall_minutes > 0; }
};

// In-situ visualisation with ParaView Catalyst (io/catalyst_adaptor.hpp). Present in the case
// file: on (the build must have Catalyst); no scripts: the built-in writer pipeline.
struct CatalystConfig {
  bool enabled = false;              // the case has a 'catalyst' section
  std::vector<std::string> scripts;  // Python Catalyst scripts, resolved paths
  long every = 1;                    // steps between Catalyst calls (and the first and last step)
  bool fail_on_error = false;        // a failing script stops the run (else: logged, run goes on)
};

struct CaseConfig {
  std::string file;            // where it came from, for messages
  std::string text;            // the YAML text as given (stored in reports)
  std::string effective_text;  // the YAML with --set overrides applied (stored in checkpoints)
  std::string workload;
  std::string name;
  Box domain;  // when the workload takes a domain (Section::kDomain)
  TimeConfig time;
  OutputConfig output;
  DecompositionConfig decomposition;
  CheckpointConfig checkpoint;
  CatalystConfig catalyst;
  std::shared_ptr<const WorkloadSettings> settings;  // the workload's own sections

  // The workload's own sections, as its schema read them.
  template <class T>
  const T& settings_as() const {
    return dynamic_cast<const T&>(*settings);
  }
};

// Helpers for workload schemas: a {lo, hi} box (hi > lo in every coordinate), containment
// within a tolerance, and a box as text for messages.
Box read_box(MapReader& r, const std::string& key_lo = "lo", const std::string& key_hi = "hi");
bool box_inside(const Box& inner, const Box& outer, double tol);
std::string box_text(const Box& b);

// Parses and validates; throws ConfigError naming file, line, key and what is accepted.
CaseConfig parse_case(const std::string& file, const std::vector<std::string>& overrides);
CaseConfig parse_case_text(const std::string& file, const std::string& text,
                           const std::vector<std::string>& overrides);

// The scalar at a dotted key path ("sph.spacing", "fluid[0].lo[1]") of a YAML text, or "" where
// it has none.
std::string scalar_at(const std::string& yaml_text, const std::string& key_path);

// A restart may change the end, the output (its folder and cadence), the checkpoints, Catalyst and
// the decomposition (so the rank count), nothing else: throws ConfigError naming each key whose
// value differs between the case as given now and the case the checkpoint was written by.
void check_restart_compatible(const CaseConfig& now, const std::string& checkpoint_file,
                              const std::string& checkpoint_text);

}  // namespace apron::config
