// The interface every workload implements (ARCHITECTURE.md, "A run"): time-stepping workloads
// and one-shot analyses are driven by the same loop.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/case_config.hpp"
#include "io/visual_data.hpp"

namespace apron {

namespace io {
class PendingCheckpoint;
class CheckpointReader;
}  // namespace io

class Json;

// A step that failed before it changed the workload's state (the pressure solve of FLIP did not
// converge, say): the driver writes a last checkpoint of the state the step started from, then
// the run fails with this message (exit 1). Thrown on every rank alike.
class StepFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where a run is. Time-stepping workloads move it every step; a one-shot analysis is at step 1,
// time 1 once it has run.
struct Clock {
  long step = 0;
  double time = 0;
  double dt = 0;  // the last step's
};

// What the log and the run report call a workload's items and its output.
struct WorkloadDescription {
  std::string item_name;    // what one item is: "particle", "sample", "vertex"
  std::string output_hint;  // what the output folder holds
};

class Workload {
 public:
  Workload(const config::CaseConfig& config, WorkloadDescription description);
  virtual ~Workload();
  virtual void setup() = 0;
  virtual void advance() = 0;  // one step
  // A one-shot analysis is done after its one step.
  virtual bool done() const { return clock_.step > 0; }
  virtual double end_time() const { return 1; }
  long step() const { return clock_.step; }
  double time() const { return clock_.time; }
  double last_dt() const { return clock_.dt; }
  virtual std::size_t global_items() const = 0;  // particles (or samples, bricks...) in the run
  // Writes what is due at the current step: diagnostics rows, visual output. `final` forces both.
  virtual void write_outputs(bool final) = 0;
  virtual void report(Json& json) const = 0;  // its part of the run report (collective)
  // In-situ visualisation (io/catalyst_adaptor.hpp): this rank's data at the current step, in
  // host buffers the workload leaves unchanged until its next advance(). None by default.
  virtual std::vector<io::VisualBlock> visual_blocks() { return {}; }
  const std::string& output_dir() const;
  const std::string& item_name() const { return description_.item_name; }
  const std::string& output_hint() const { return description_.output_hint; }
  // Checkpoints (io/checkpoint.hpp), collective, for time-stepping workloads; one-shot analyses
  // have nothing to continue and keep these defaults (the driver never calls save/load then).
  // save() copies the state to host staging and starts the write (the driver finishes it, and
  // never starts another before). load() replaces setup(): it continues the run from the
  // checkpoint, on this run's rank count, and resumes the output series.
  virtual bool checkpointable() const { return false; }
  virtual io::PendingCheckpoint save(const std::filesystem::path& file) const;
  virtual void load(const io::CheckpointReader& checkpoint);

 protected:
  const config::CaseConfig config_;  // the case as validated (a copy: tests pass temporaries)
  Clock clock_;

 private:
  WorkloadDescription description_;
};

// Collective. max / mean of the items each rank owns when the case asks for a new RCB cut at this
// step (method rcb, several ranks, a check step, the ratio over rebalance_threshold); 0 when not.
double imbalance_to_fix(const config::CaseConfig& config, MPI_Comm comm, int ranks, long step,
                        std::size_t owned);

}  // namespace apron
