// Particle generation from the case geometry: fluid blocks filled on a cubic lattice of spacing
// dx, and ghost boundary particles in `layers` lattice layers behind every wall. Generation is
// restricted to a box, so each rank makes only its own particles, and global ids follow from the
// lattice index, so they do not depend on the rank count.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/common/vec.hpp"
#include "sph/sph_config.hpp"

namespace apron::sph {

struct HostParticles {
  std::vector<Vec4> pos;
  std::vector<std::int64_t> id;
  std::vector<float> density;  // empty, or each particle's at the start (continuity density)
};

// Lattice points of spacing dx along an extent, in float64 (any input, no integer overflow):
// what the case's lattices use, and what the case check counts with before anything is made.
inline double lattice_points(double extent, double dx) {
  return std::floor(extent / dx + 1e-6);
}

// Points of the lattice lo + (i + 1/2) dx over `box` (per axis), and those of them in `filter`
// appended to `out` with ids first_id + their lattice index.
std::int64_t lattice_size(const Box& box, double dx);
void append_lattice(const Box& box, double dx, const Box& filter, std::int64_t first_id,
                    HostParticles& out);

// Number of fluid particles the case generates (all ranks): exact for box blocks, an upper bound
// (their bounds' lattice) for fluid meshes.
std::int64_t fluid_count(const SphCase& c);
// The lattice ids the box blocks use: fluid meshes' ids start here.
std::int64_t block_lattice_size(const SphCase& c);
// Approximate number of boundary particles (for the memory check).
std::int64_t boundary_count_estimate(const SphCase& c);

// The box blocks' lattice points in `filter` (fluid meshes: MeshGeometry::fluid_particles).
HostParticles generate_fluid(const SphCase& c, const Box& filter);
// The boundary particles of the box tank and the resting box solids in `filter`.
std::vector<Vec4> generate_boundary(const SphCase& c, const Box& filter);
// The boundary particles of one box solid in `filter`: its lattice within `layers` of its faces.
void append_box_solid(const SphCase& c, const Box& solid, const Box& filter,
                      std::vector<Vec4>& out);

struct Params;

// Puts fluid lattice points at rest in hydrostatic equilibrium: each box block's (or fluid
// mesh's) lattice compressed along gravity towards its lowest point, so that the summation
// density at depth d below its top gives the pressure whose SPH gradient holds the lattice up:
// rho0 g d with the lattice gradient correction (Params::gradient_correction), rho0 g d / M
// without it (M: lattice_compression_response). Each particle's block follows from its id.
// Where fluid.density is sized, it gets that density at each particle's depth.
void compress_hydrostatically(const SphCase& c, const Params& params, HostParticles& fluid);

// Particle mass that makes the SPH density of a full interior lattice exactly rho0.
double lattice_mass(double rest_density, double spacing, double smoothing_ratio);
// M = (d rho / rho) / strain for the interior lattice compressed along one axis, which is also
// the SPH gradient of a linear field on it over the true gradient: 0.970 at h / dx = 1.3, 1 in
// the continuum. At rest under gravity the uncorrected lattice's pressure is therefore
// rho0 g d / M.
double lattice_compression_response(double spacing, double smoothing_ratio);

}  // namespace apron::sph
