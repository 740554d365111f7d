// What config/ knows of a workload: which shared sections of the case file it takes and how to
// read its own sections. config/ knows no physics; each workload's schema lives beside its code
// and reaches config/ through the workload registry (src/workload_registry.hpp).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace apron::config {

struct CaseConfig;
class MapReader;

// A workload's own sections, as its schema reader parsed and validated them.
struct WorkloadSettings {
  virtual ~WorkloadSettings() = default;
};

// The shared sections (parsed once, by config/) a workload accepts; a case that gives one the
// workload does not take is refused as an unknown key. `output.dir` and `output.progress_every`
// belong to every workload.
enum Section : unsigned {
  kDomain = 1u << 0,         // domain: {lo, hi}, the box the ranks split
  kTime = 1u << 1,           // time: {end, max_steps}
  kOutputSeries = 1u << 2,   // output: {every, diagnostics_every}
  kDecomposition = 1u << 3,  // decomposition: {method, dims, rebalance_*}
  kCheckpoint = 1u << 4,     // checkpoint: {every_*, keep, at_end}
  kCatalyst = 1u << 5,       // catalyst: {scripts, every, fail_on_error}
  kTimeStepping = kDomain | kTime | kOutputSeries | kDecomposition | kCheckpoint | kCatalyst,
};

struct WorkloadSchema {
  unsigned sections = 0;  // Section flags
  // Reads the workload's own sections from `root` (the shared ones are in `c` already) and
  // checks them against the shared ones; errors through root.fail(). Must not call
  // root.finish(): the parser does, after every section was read.
  std::function<std::shared_ptr<const WorkloadSettings>(const CaseConfig& c, MapReader& root)> read;
};

// The schema of a registered workload, or null (src/workload_registry.cpp).
const WorkloadSchema* find_schema(const std::string& workload);
std::vector<std::string> workload_names();

}  // namespace apron::config
