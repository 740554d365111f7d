// The SPH workload's own sections of a case file (its schema, registered with the workload):
// `sph` (the method's parameters), `fluid` (blocks filled with particles) and `boundary` (the
// tank and solids sampled with boundary particles). The shared sections are config/'s.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/case_config.hpp"
#include "config/mesh_shape.hpp"
#include "engine/prescribed_motion.hpp"
#include "kernels/common/vec.hpp"
#include "kernels/surface/host_surface.hpp"

namespace apron::sph {

using Vec3d = std::array<double, 3>;

struct SphConfig {
  double spacing = 0;            // particle spacing dx [m]
  double smoothing_ratio = 1.3;  // h / dx
  double rest_density = 1000;    // rho0 [kg/m^3]
  double sound_speed = 0;        // c0 [m/s]; 0: 10 sqrt(2 g H) from the fluid height H
  double alpha = 0.02;           // artificial viscosity (Monaghan)
  double viscosity = 0;          // the fluid's kinematic viscosity, laminar term [m^2/s]; 0: none
  double wall_alpha = 0.02;      // artificial viscosity against boundary particles
  double wall_viscosity = 0;     // [m^2/s]; > 0 sets wall_alpha = 10 nu / (h c0) at any spacing
  Vec3d gravity{0, 0, -9.81};
  double cfl = 0.25;           // dt <= cfl h / (c0 + v_max)
  double force_factor = 0.25;  // dt <= force_factor sqrt(h / a_max)
  bool clamp_negative_pressure = true;
  int cell_divisions = 2;  // cells per interaction radius: 1 is the paper's 27-cell search
  // true: fluid starts in hydrostatic equilibrium (compressed along gravity to the density of
  // p = rho0 g depth); false: on the uniform lattice at rho0, which collapses and rings at first.
  bool hydrostatic_start = true;
  // true: the kernel gradient is divided by M, the SPH gradient of a linear field on the
  // particle lattice over the true one (lattice_compression_response), so a pressure gradient
  // carries its true force there (0.970 of it uncorrected at h / dx = 1.3); false: the plain
  // kernel gradient.
  bool lattice_gradient_correction = true;
  // How a particle's density is known. Summation: rho = sum m W over its neighbours each step
  // (low where the kernel is cut by the free surface). Continuity: each particle carries its
  // density and changes it by the velocity's divergence, d rho/dt = sum m v_ab . grad W, with
  // delta-SPH density diffusion (Molteni & Colagrossi 2009, the hydrostatic part of the density
  // differences taken out as Fourtakas et al. 2019 do) of strength density_diffusion; what
  // DualSPHysics runs for wave flumes.
  bool continuity_density = false;
  double density_diffusion = 0.1;  // delta
};

// A triangle mesh the case places ({mesh: file, scale, rotation, offset}), read and placed when
// the case is read (config/mesh_shape.hpp). Closed unless `open` (a tank without a lid).
using MeshShape = config::MeshShape;

struct BoundaryConfig {
  bool ghost_particles = true;  // false: boundary particles only repel (the paper's comparison)
  // true (the default): each boundary particle's pressure is the kernel average of the fluid's
  // around it plus the hydrostatic head (Adami et al. 2012); false: each fluid particle's own
  // pressure mirrored to the boundary particles it sees, which makes the wall's push depend on
  // the particle's state and creates energy (unstable at rest below alpha ~0.05: bench/NOTES.md).
  bool wall_pressure_from_fluid = true;
  int layers = 3;  // layers of boundary particles behind each wall
  bool has_tank = false;
  Box tank;  // the container's interior (a mesh tank's bounds); walls on all faces but the top
  bool tank_closed_top = false;
  std::optional<MeshShape> tank_mesh;  // the tank as a mesh: its inside holds the fluid
  std::vector<Box> solids;             // solid obstacles, sampled within `layers` of their surface
  std::vector<MeshShape> solid_meshes;
  // Each solid's prescribed motion (none: it rests), in the order of `solids`, then of
  // `solid_meshes`.
  std::vector<PrescribedMotion> box_motions, mesh_motions;
  bool has_meshes() const { return tank_mesh || !solid_meshes.empty(); }
  int moving_solids() const;
};

// At most this many solids move in one case (their forces are summed per solid in one pass).
inline constexpr int kMaxMovingSolids = 8;

// A wave gauge: the free surface's height over the point (x, y), sampled at every diagnostics
// row (the highest fluid particle within one spacing of the vertical through it, plus half a
// spacing), as a resistance-type gauge in a flume measures it.
struct Gauge {
  double x = 0, y = 0;
};

// Everything of a `workload: sph` case beyond the shared sections.
struct SphCase : config::WorkloadSettings {
  SphConfig sph;
  std::vector<Box> fluid_blocks;
  std::vector<MeshShape> fluid_meshes;  // closed meshes filled with fluid
  BoundaryConfig boundary;
  std::vector<Gauge> gauges;
};

// Reads `sph`, `fluid` and `boundary` and checks them against the domain.
std::shared_ptr<const SphCase> read_sph_case(const config::CaseConfig& c, config::MapReader& root);
// The SPH schema: the shared sections it takes and read_sph_case.
config::WorkloadSchema sph_schema();

// The SPH sections of a case that is `workload: sph`.
inline const SphCase& sph_case(const config::CaseConfig& c) {
  return c.settings_as<SphCase>();
}

}  // namespace apron::sph
