// The SPH workload's entry in the registry: its schema, its factory and its weak-scaling knob.
#include "sph/sph_config.hpp"
#include "sph/sph_solver.hpp"

namespace apron::sph {

WorkloadSpec sph_spec() {
  WorkloadSpec spec;
  spec.name = "sph";
  spec.summary = "weakly-compressible SPH with ghost boundary particles (time-stepping)";
  spec.schema = sph_schema();
  spec.make = [](const WorkloadContext& x) -> std::unique_ptr<Workload> {
    return std::make_unique<SphSolver>(x.config, x.ranks, x.device, x.timers);
  };
  // Particles grow as spacing^-3: spacing * (r / r0)^(-1/3) keeps the particles per rank.
  spec.weak_scaling = {"sph.spacing", -1.0 / 3.0};
  return spec;
}

}  // namespace apron::sph
