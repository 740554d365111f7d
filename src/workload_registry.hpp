// Workloads by name (ARCHITECTURE.md, "A run", 3): each workload's folder describes itself in one
// WorkloadSpec (its schema, its factory, its weak-scaling knob) and the built-in ones are listed
// in src/workloads.cpp, one line each. A program may register more before it parses a case (the
// tests register a test-only workload this way); config/ and the driver find them here.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/case_config.hpp"
#include "config/workload_schema.hpp"
#include "runtime/runtime.hpp"

namespace apron {

class Workload;

// What a factory gets: the validated case and this rank's runtime.
struct WorkloadContext {
  const config::CaseConfig& config;
  RankInfo ranks;
  DeviceInfo device;
  PhaseTimers& timers;
};

// How the weak-scaling driver (jobs/scaling) grows the problem with the rank count r from r0:
// the value of `key` is multiplied by (r / r0)^exponent. Empty key: no weak scaling.
struct WeakScalingKnob {
  std::string key;  // a --set key path, e.g. "sph.spacing"
  double exponent = 0;
};

struct WorkloadSpec {
  std::string name;     // `workload:` in the case file
  std::string summary;  // one line for `apron workloads`
  config::WorkloadSchema schema;
  std::function<std::unique_ptr<Workload>(const WorkloadContext&)> make;
  WeakScalingKnob weak_scaling;
};

// The entry of workload class W, built from the context: what each workload's folder returns.
template <class W>
WorkloadSpec workload_spec_of(std::string name, std::string summary, config::WorkloadSchema schema,
                              WeakScalingKnob weak_scaling = {}) {
  return {
      std::move(name), std::move(summary), std::move(schema),
      [](const WorkloadContext& x) -> std::unique_ptr<Workload> { return std::make_unique<W>(x); },
      std::move(weak_scaling)};
}

// Adds a workload; a second one with the same name is a programming error (std::logic_error).
void register_workload(WorkloadSpec spec);
// The registered workload of that name (the built-ins are registered on first use).
const WorkloadSpec& workload_spec(const std::string& name);
std::vector<const WorkloadSpec*> registered_workloads();

// The built-in workloads (src/workloads.cpp).
std::vector<WorkloadSpec> builtin_workloads();

}  // namespace apron
