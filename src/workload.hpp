// The interface every workload implements (ARCHITECTURE.md, "A run"): time-stepping workloads
// and one-shot analyses are driven by the same loop.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace apron {

class Json;
namespace io {
class CheckpointReader;
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
  virtual std::string output_dir() const = 0;
  // Checkpoints (io/checkpoint.hpp), collective. load() replaces setup(): it continues the run
  // from the checkpoint, on this run's rank count, and resumes the output series.
  virtual void save(const std::filesystem::path& file) const = 0;
  virtual void load(const io::CheckpointReader& checkpoint) = 0;
};

}  // namespace apron
