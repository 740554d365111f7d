// The built-in workloads: adding one is its own folder and one line here.
#include "cloth/cloth_solver.hpp"
#include "flip/flip_solver.hpp"
#include "meshdist/meshdist_workload.hpp"
#include "planes/planes_workload.hpp"
#include "sph/sph_solver.hpp"
#include "workload_registry.hpp"

namespace apron {

std::vector<WorkloadSpec> builtin_workloads() {
  return {sph::sph_spec(), meshdist::meshdist_spec(), flip::flip_spec(), planes::planes_spec(),
          cloth::cloth_spec()};
}

}  // namespace apron
