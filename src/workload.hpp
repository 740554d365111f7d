// The interface every workload implements (ARCHITECTURE.md, "A run"): time-stepping workloads
// and one-shot analyses are driven by the same loop.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "decomposition/partition.hpp"
#include "io/checkpoint.hpp"
#include "io/visual_data.hpp"

namespace apron {

class Json;

// A step that failed before it changed the workload's state (the pressure solve of FLIP did not
// converge, say): the driver writes a last checkpoint of the state the step started from, then
// the run fails with this message (exit 1). Thrown on every rank alike.
class StepFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace config {
struct CaseConfig;
}

class Workload {
 public:
  virtual ~Workload() = default;
  virtual void setup() = 0;
  virtual void advance() = 0;  // one step
  virtual bool done() const = 0;
  virtual long step() const = 0;
  virtual double time() const = 0;
  virtual double end_time() const = 0;
  virtual double last_dt() const = 0;
  virtual std::size_t global_items() const = 0;  // particles (or samples, bricks...) in the run
  // Writes what is due at the current step: diagnostics rows, visual output. `final` forces both.
  virtual void write_outputs(bool final) = 0;
  virtual void report(Json& json) const = 0;  // its part of the run report (collective)
  // In-situ visualisation (io/catalyst_adaptor.hpp): this rank's data at the current step, in
  // host buffers the workload leaves unchanged until its next advance(). None by default.
  virtual std::vector<io::VisualBlock> visual_blocks() { return {}; }
  virtual std::string output_dir() const = 0;
  // For the log: what one item is ("particle", "sample") and what the output folder holds.
  virtual std::string item_name() const = 0;
  virtual std::string output_hint() const = 0;
  // Checkpoints (io/checkpoint.hpp), collective, for time-stepping workloads; one-shot analyses
  // have nothing to continue and keep these defaults (the driver never calls save/load then).
  // save() copies the state to host staging and starts the write (the driver finishes it, and
  // never starts another before). load() replaces setup(): it continues the run from the
  // checkpoint, on this run's rank count, and resumes the output series.
  virtual bool checkpointable() const { return false; }
  virtual io::PendingCheckpoint save(const std::filesystem::path&) const {
    throw std::logic_error("this workload writes no checkpoints");
  }
  virtual void load(const io::CheckpointReader&) {
    throw std::logic_error("this workload reads no checkpoints");
  }
};

// The header every checkpoint of a time-stepping workload carries: which workload wrote it, the
// case as run, where the run is, the rank count and the build. The workload adds its seed and
// scalars.
io::CheckpointHeader checkpoint_header(const std::string& workload,
                                       const config::CaseConfig& config, long step, double time,
                                       double dt, int ranks, const std::string& backend);

// The partition a checkpoint keeps, as the replicated array "partition" (one row of 6 doubles,
// lo then hi, per writing rank): the rows to save, and the partition read back from a checkpoint
// (collective), checked: one box per writing rank, finite bounds (std::runtime_error naming the
// file otherwise).
std::vector<double> partition_rows(const Partition& partition);
Partition saved_partition(const io::CheckpointReader& checkpoint, const Box& domain);

// Collective. max / mean of the items each rank owns when the case asks for a new RCB cut at this
// step (method rcb, several ranks, a check step, the ratio over rebalance_threshold); 0 when not.
double imbalance_to_fix(const config::CaseConfig& config, MPI_Comm comm, int ranks, long step,
                        std::size_t owned);

}  // namespace apron
