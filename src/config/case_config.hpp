// The typed configuration of a run, parsed and validated from YAML before anything is allocated.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "config/meshdist_config.hpp"
#include "kernels/common/vec.hpp"

namespace apron::config {

using Vec3d = std::array<double, 3>;

struct SphConfig {
  double spacing = 0;            // particle spacing dx [m]
  double smoothing_ratio = 1.3;  // h / dx
  double rest_density = 1000;    // rho0 [kg/m^3]
  double sound_speed = 0;        // c0 [m/s]; 0: 10 sqrt(2 g H) from the fluid height H
  double alpha = 0.02;           // artificial viscosity (Monaghan)
  double wall_alpha = 0.02;      // artificial viscosity against boundary particles
  double wall_viscosity = 0;     // [m^2/s]; > 0 sets wall_alpha = 10 nu / (h c0) at any spacing
  Vec3d gravity{0, 0, -9.81};
  double cfl = 0.25;           // dt <= cfl h / (c0 + v_max)
  double force_factor = 0.25;  // dt <= force_factor sqrt(h / a_max)
  bool clamp_negative_pressure = true;
  int cell_divisions = 2;  // cells per interaction radius: 1 is the paper's 27-cell search
};

struct BoundaryConfig {
  bool ghost_particles = true;  // false: boundary particles only repel (the paper's comparison)
  int layers = 3;               // layers of boundary particles behind each wall
  bool has_tank = false;
  Box tank;  // the container's interior; walls on all faces but the top
  bool tank_closed_top = false;
  std::vector<Box> solids;  // solid obstacles, sampled within `layers` of their surface
};

struct TimeConfig {
  double end = 0;
  long max_steps = 0;  // 0: no limit
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
  std::string workload = "sph";
  std::string name;
  Box domain;
  SphConfig sph;
  std::vector<Box> fluid_blocks;
  BoundaryConfig boundary;
  TimeConfig time;
  OutputConfig output;
  DecompositionConfig decomposition;
  CheckpointConfig checkpoint;
  CatalystConfig catalyst;
  MeshdistConfig meshdist;  // workload: meshdist
};

// Parses and validates; throws ConfigError naming file, line, key and what is accepted.
CaseConfig parse_case(const std::string& file, const std::vector<std::string>& overrides);
CaseConfig parse_case_text(const std::string& file, const std::string& text,
                           const std::vector<std::string>& overrides);

// A restart may change the end, the output (its folder and cadence), the checkpoints, Catalyst and
// the decomposition (so the rank count), nothing else: throws ConfigError naming each key whose
// value differs between the case as given now and the case the checkpoint was written by.
void check_restart_compatible(const CaseConfig& now, const std::string& checkpoint_file,
                              const std::string& checkpoint_text);

}  // namespace apron::config
