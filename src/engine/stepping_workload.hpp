// The time-stepping core (ARCHITECTURE.md, "A run", 3): what SPH, FLIP, cloth and every later
// time-stepping workload have in common, written once. It owns the clock (step, time, dt), the
// output and diagnostics schedule, the visual series and their resume after a restart, the
// diagnostics table (its header and rows from one column list), the checkpoint header, the
// reading and checking of the saved tables and the partition a restart continues on.
//
// A workload declares, in its constructor, its diagnostic columns, its series and its state
// tables, and implements:
//   start()            the initial state (the run's setup);
//   take_step()        one step, returning the dt it took;
//   diagnostics_row()  the values of its columns now (collective);
//   write_series()     this output step's visual files (collective);
//   save_state()       its rows of each declared table, and its scalars;
//   restore()          the state from a checkpoint's rows (each rank's share, checked);
//   report_fields()    its members of the run report (the core adds the last diagnostics row);
//   largest_step()     the largest dt its step can take and what sets it, so that a run whose
//                      step count to time.end no machine can reach is refused before it starts.
// A step that leaves a value that is not finite ends the run (exit 1): the workload's step
// passes its own cheap flag to require_finite(), or records the first bad step where the core
// reads it now and then (first_unfinite_step()), and the core checks every diagnostics row.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/diagnostic_columns.hpp"
#include "engine/state_tables.hpp"
#include "io/diagnostics_table.hpp"
#include "io/series_output.hpp"
#include "runtime/schedule.hpp"
#include "workload.hpp"
#include "workload_registry.hpp"

namespace apron {

// What a time-stepping workload declares about itself.
struct SteppingDeclaration {
  WorkloadDescription description;
  std::vector<DiagnosticColumn> columns;  // after step, time and dt, which every table has
  std::vector<std::string> series;        // visual series (basenames of their .xmf files)
  std::vector<TableSpec> tables;          // the checkpointed state
  bool partitioned = false;               // saves the partition its rows were cut by
  std::string state_name;                 // what require_finite() checks: "particle velocities"
  std::string unstable_hint;              // what to change when it fails: "lower sph.cfl"
};

// The largest step a workload can take, and the key (or the mesh feature) that sets it.
struct StepLimit {
  double dt = 0;
  std::string cause;  // "key 'flip.max_dt' (1e-300 s)"
  std::string fix;    // "raise it"
};

class SteppingWorkload : public Workload {
 public:
  void setup() final;
  void advance() final;
  bool done() const final { return config_.time.reached(clock_.step, clock_.time); }
  double end_time() const final { return config_.time.end; }
  void write_outputs(bool final) final;
  void report(Json& json) const final;
  bool checkpointable() const final { return true; }
  io::PendingCheckpoint save(const std::filesystem::path& file) const final;
  void load(const io::CheckpointReader& checkpoint) final;

 protected:
  SteppingWorkload(const WorkloadContext& context, SteppingDeclaration declaration);

  virtual void start() = 0;
  virtual double take_step() = 0;
  virtual std::vector<double> diagnostics_row() = 0;
  virtual void write_series() = 0;
  virtual void save_state(SavedState& state) const = 0;
  virtual void restore(const LoadedState& state) = 0;
  // Its own members of the run report's object for this workload (collective).
  virtual void report_fields(Json& json) const = 0;
  // After start() or restore(): an upper bound of every dt the run will take.
  virtual StepLimit largest_step() const = 0;

  // Collective. Ends the run on every rank (exit 1) when `finite` is false on any rank: the state
  // after `step` holds a value that is not finite. `finite` is what the step computed anyway (a
  // flag its kernels set, or the extremes it chose dt from): one flag reduced over the ranks.
  void require_finite(bool finite, long step) const;
  // The same, for a state every rank already knows is not finite (from a reduction of its own).
  [[noreturn]] void fail_not_finite(long step) const;
  // For a step whose flag would cost a device-to-host copy each step (cloth's: 1.5% of a step at
  // 10^6 vertices): the first step after which the state held a value that is not finite, as its
  // kernels recorded it on the device, 0 while there is none. The core reads it every
  // kFiniteCheckEvery steps and before every diagnostics row, output and checkpoint, so nothing
  // not finite is written and the error still names the first bad step.
  virtual long first_unfinite_step() const { return 0; }
  static constexpr long kFiniteCheckEvery = 64;

  io::SeriesWriter& series(std::size_t k) { return *series_[k]; }
  // Collective. The partition a restart continues on: the saved one on the same rank count
  // (bitwise continuation), else a new cut over the positions each rank read (RCB when the case
  // asks for it on several ranks, the cartesian grid otherwise), passed through `adjust` (FLIP
  // snaps it to its bricks).
  Partition continuing_partition(
      const LoadedState& state, std::span<const Vec4> points,
      const std::function<Partition(const Partition&)>& adjust = {}) const;

  RankInfo ranks_;
  DeviceInfo device_;
  PhaseTimers& timers_;
  TimeSchedule outputs_;  // the visual series, from t = 0

 private:
  void open_outputs(std::optional<long> resume_step);
  void refuse_unreachable_end() const;
  void require_finite_row(std::span<const double> row) const;
  void require_recorded_finite() const;  // collective: first_unfinite_step() on every rank
  std::vector<TableSpec> tables_;
  bool partitioned_;
  DiagnosticColumns columns_;
  std::string state_name_, unstable_hint_;
  std::vector<std::string> series_names_;
  std::vector<std::unique_ptr<io::SeriesWriter>> series_;
  std::optional<io::DiagnosticsTable> table_;  // rank 0
  std::vector<double> last_row_;               // step, time, dt, then the workload's columns
};

}  // namespace apron
