// The FLIP workload's own sections of a case file (its schema, registered with the workload):
// `flip` (the method's parameters), `fluid` (blocks seeded with particles) and `solids` (boxes,
// or closed triangle meshes, whose voxels are solid). The domain is the tank: its faces are solid
// walls.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "config/case_config.hpp"
#include "flip/mesh_solids.hpp"
#include "kernels/common/box.hpp"

namespace apron::flip {

struct PressureConfig {
  // Converged when max |div u| dt over fluid voxels (the fraction of a voxel's volume that the
  // step would create or destroy) is below it.
  double tolerance = 1e-4;
  int max_iterations = 1000;
  std::string preconditioner = "mgpcg";  // none | jacobi | mgpcg (multigrid V-cycle)
  int check_every = 10;  // iterations between residual checks (each reads back to the host)
};

struct FlipConfig {
  double voxel_size = 0;        // dx [m]; must divide the domain's extents
  int brick_size = 8;           // voxels per brick edge (a power of two, 4..32)
  int particles_per_voxel = 8;  // 1, 8 or 27: a jittered n^3 lattice per voxel (paper: 8)
  double flip_ratio = 0.95;     // 1: pure FLIP, 0: pure PIC
  double cfl = 0.5;             // dt <= cfl dx / (v_max + sqrt(|g| dx))
  double max_dt = 1e-2;         // [s]
  double density = 1000;        // [kg/m^3]
  std::array<double, 3> gravity{0, 0, -9.81};
  // Coulomb friction coefficient at solid walls and solids (0: free slip): a face velocity
  // along a wall loses wall_friction times the normal velocity the wall stopped that step.
  double wall_friction = 0;
  std::uint64_t seed = 1;  // the jitter of the seeding
  PressureConfig pressure;
};

struct FlipCase : config::WorkloadSettings {
  FlipConfig flip;
  std::vector<Box> fluid_blocks;
  std::vector<Box> solids;  // solids: [{lo, hi}, ...]
  // solids: [{mesh: file, scale, rotation, offset}, ...], closed, read and placed
  std::vector<config::MeshShape> solid_meshes;
};

std::shared_ptr<const FlipCase> read_flip_case(const config::CaseConfig& c,
                                               config::MapReader& root);
config::WorkloadSchema flip_schema();

inline const FlipCase& flip_case(const config::CaseConfig& c) {
  return c.settings_as<FlipCase>();
}

}  // namespace apron::flip
