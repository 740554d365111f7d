// The FLIP fluid's device kernels on sparse bricks (Wu, Truong, Yuksel, Hoetzlein 2018):
// particle-to-grid by gather, grid velocities with gravity and solid walls, the pressure
// projection (matrix-free conjugate gradient on the 7-point Laplacian) and grid-to-particle with
// advection.
//
// The grid is a MAC grid: the value stored at voxel (i, j, k) holds the x velocity on its face at
// x = i (lower x face), y on the face at y = j and z on the face at z = k, in voxel units from
// the domain's corner; pressure, marker and divergence sit at the voxel's centre. Rows follow
// BrickGrid::row(): every local slot's (B + 2)^3 voxels, interior and apron.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/backend.hpp"
#include "kernels/sparse/brick_grid.hpp"

namespace apron::flip {

enum : std::int32_t { kAir = 0, kFluid = 1 };

// Where the local slots' bricks are and which voxels are solid.
struct SlotGeometry {
  BrickGrid grid;
  const int* origin = nullptr;  // per local slot: its first voxel (3 ints)
  SolidVoxels solid;
  std::size_t slots = 0;  // local slots

  APRON_HD bool solid_at(std::size_t slot, int i, int j, int k) const {
    const int* o = origin + 3 * slot;
    return solid(grid, o[0] + i, o[1] + j, o[2] + k);
  }
  std::size_t interior_voxels() const { return slots * grid.interior_per_brick(); }
  std::size_t stored_voxels() const { return slots * grid.stored_per_brick(); }
};

// ---- particles -> voxels ------------------------------------------------------------------------

// keys[p] = the interior index (BrickGrid::interior_index) of particle p's voxel in its brick's
// slot, order[p] = p (what a sort by key permutes); slot_of maps brick keys to local slots
// (every particle's brick must be held).
void particle_voxel_keys(const SlotGeometry& g, const std::int32_t* slot_of,
                         const DeviceVector<Vec4>& pos, std::size_t n,
                         DeviceVector<std::uint32_t>& keys, DeviceVector<std::uint32_t>& order);
// After sorting the particles by those keys: first[v] .. last[v] are the particles of interior
// voxel v (first == last when empty); both are resized to g.interior_voxels().
void voxel_ranges(const SlotGeometry& g, const DeviceVector<std::uint32_t>& sorted_keys,
                  std::size_t n, DeviceVector<std::uint32_t>& first,
                  DeviceVector<std::uint32_t>& last);

// ---- the grid step ------------------------------------------------------------------------------

struct GridFields {
  Vec4* momentum;  // P2G sums of weight * velocity per face component
  Vec4* weight;    // P2G sums of weights per face component; w: particles in the voxel
  Vec4* vel;       // face velocities
  Vec4* vel_old;   // face velocities after P2G (FLIP takes the change since)
  std::int32_t* marker;
  std::int32_t* stencil;  // per interior voxel: see pressure_stencil
  float* pressure;        // the projection's solution s (velocity units); p = rho dx s / dt
  float* rhs;             // -dx div(u) at fluid voxels
};

// Particle-to-grid by gather, no atomics: every stored voxel of every local slot (interior and
// apron) sums the trilinear weights of the slot's own particles within one voxel of its faces.
// The apron sums belong to neighbouring bricks: BrickHalo::reverse_sum adds them there.
void particle_to_grid(const SlotGeometry& g, const DeviceVector<std::uint32_t>& first,
                      const DeviceVector<std::uint32_t>& last, const DeviceVector<Vec4>& pos,
                      const DeviceVector<Vec4>& vel, const GridFields& f);

// Interior voxels: velocity = momentum / weight, kept as vel_old; then gravity over dt on faces
// that received weight, and zero normal velocity on faces touching a solid voxel. Marks fluid
// voxels (those holding a particle).
void grid_velocities(const SlotGeometry& g, const GridFields& f, Vec3 gravity, float dt);

// After the aprons of vel and marker are filled: each interior voxel's stencil (its own type,
// which neighbours are fluid, how many are not solid) and the right-hand side -dx div(u) at fluid
// voxels (0 elsewhere). Returns max |dx div u| over fluid voxels (this rank).
float pressure_system(const SlotGeometry& g, const GridFields& f);

// q = A d at fluid voxels (0 elsewhere): A = the 7-point Laplacian scaled by -dx^2, air
// neighbours Dirichlet 0, solid neighbours Neumann. d's apron must be filled. Returns the sum of
// d q over interior voxels (this rank, float64): the product and its dot product in one pass.
double apply_laplacian(const SlotGeometry& g, const std::int32_t* stencil, const float* d,
                       float* q);
// z = M^-1 r: Jacobi (divide by the diagonal) or none (copy). Interior voxels. Returns the sum
// of r z (this rank, float64).
double precondition(const SlotGeometry& g, const std::int32_t* stencil, bool jacobi, const float* r,
                    float* z);
// x += alpha d, r -= alpha q; then d = z + beta d is a separate step (z first needs r).
void cg_step(const SlotGeometry& g, double alpha, const float* d, const float* q, float* x,
             float* r);
// d = z + beta d (beta = 0: d = z, whatever d held).
void cg_direction(const SlotGeometry& g, double beta, const float* z, float* d);
// out = a - b over interior voxels (the true residual b - A x).
void difference(const SlotGeometry& g, const float* a, const float* b, float* out);
// Max over interior voxels of |a| (this rank).
float interior_max_abs(const SlotGeometry& g, const float* a);
// Sets every stored value to zero.
void clear(DeviceVector<float>& a);
void clear(DeviceVector<std::int32_t>& a);

// u -= grad s on every face with a fluid side and no solid side (air s = 0). The pressure
// field's apron must be filled.
void subtract_pressure_gradient(const SlotGeometry& g, const GridFields& f);
// Coulomb friction (coefficient mu) on face velocities tangential to solid walls: each loses,
// down to zero, mu times the velocity the walls beside it stopped along their normals this step
// (vel_old + gravity dt on the walls' faces, where it points into them). vel_old's apron must be
// filled.
void wall_friction(const SlotGeometry& g, const GridFields& f, Vec3 gravity, float dt, float mu);

// ---- voxels -> particles ------------------------------------------------------------------------

struct G2PParams {
  float flip_ratio;  // 1: pure FLIP, 0: pure PIC
  float dt;
};
// Grid-to-particle (the FLIP/PIC blend of the new velocity and the change since P2G), then
// advection by the grid velocity; a move into a solid voxel is undone axis by axis (and that
// velocity component zeroed). keys: the particles' voxel keys (their slot). vel and vel_old's
// aprons must be filled.
void grid_to_particle(const SlotGeometry& g, const DeviceVector<std::uint32_t>& keys,
                      const GridFields& f, G2PParams params, DeviceVector<Vec4>& pos,
                      DeviceVector<Vec4>& vel, std::size_t n);

// destination[p] = owner[brick key of particle p's voxel].
void particle_owners(const BrickGrid& grid, const int* owner, const DeviceVector<Vec4>& pos,
                     std::size_t n, DeviceVector<int>& destination);

// ---- diagnostics --------------------------------------------------------------------------------

struct ParticleSums {
  double speed2 = 0;  // sum |v|^2
  double max_speed = 0;
  double max_x = -1e300;  // foremost particle along x
};
ParticleSums particle_sums(const DeviceVector<Vec4>& pos, const DeviceVector<Vec4>& vel,
                           std::size_t n);
// Fluid voxels among the interiors (this rank).
std::size_t fluid_voxels(const SlotGeometry& g, const std::int32_t* marker);

}  // namespace apron::flip
