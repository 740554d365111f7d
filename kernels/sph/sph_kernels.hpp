// Weakly-compressible SPH (Becker & Teschner 2007) with ghost boundary particles: the device side.
// Fluid particles (owned and halo ghosts) and static boundary particles live in two cell lists on
// the same background grid; boundary particles contribute density and pressure force to fluid
// particles but are never integrated.
#pragma once

#include <cstdint>

#include "kernels/common/cell_list.hpp"
#include "kernels/common/vec.hpp"
#include "kernels/sph/neighbour_search.hpp"

namespace apron::sph {

// Per-particle flag bits: the kind in the low bits, GHOST for read-only halo copies.
enum ParticleFlag : std::uint8_t { kFluid = 0, kGhost = 0x80 };

// Whether a particle is this rank's own (not a halo copy).
APRON_HD inline bool is_owned(std::uint8_t flag) {
  return (flag & kGhost) == 0;
}

// Wendland C2 kernel in 3-D with support radius 2h: W(q) = 21/(16 pi h^3) (1-q/2)^4 (2q+1).
// The normalisations are precomputed: the neighbour loops are bound by instruction issue, and a
// division per neighbour costs more than the rest of the kernel evaluation.
struct Wendland {
  float h = 1;
  float half_inv_h = 0.5f;  // 1 / (2h): q/2 = r / (2h)
  float value_norm = 0;     // 21 / (16 pi h^3)
  float gradient_norm = 0;  // -105 / (16 pi h^5)

  Wendland() = default;
  explicit Wendland(float smoothing_length)
      : h(smoothing_length),
        half_inv_h(0.5f / smoothing_length),
        value_norm(21.0f / (16.0f * 3.14159265358979f * h * h * h)),
        gradient_norm(-105.0f / (16.0f * 3.14159265358979f * h * h * h * h * h)) {}

  APRON_HD float support() const { return 2 * h; }
  // u = q/2 = |r| / 2h from r^2. On the GPU through the fast reciprocal square root (about
  // 2 ulp): a correctly rounded sqrtf is ~10 instructions and a branch, paid for every candidate.
  APRON_HD float half_q(float r2) const {
#if defined(__CUDA_ARCH__)
    const float r2_safe = fmaxf(r2, 1e-30f);  // rsqrt(0) is infinite
    return r2_safe * rsqrtf(r2_safe) * half_inv_h;
#else
    return sqrtf(r2) * half_inv_h;
#endif
  }
  // W / value_norm = (1 - q/2)^4 (2q + 1), zero beyond the support and branch-free, so the lanes
  // of a GPU warp do not diverge. The neighbour loops sum shapes and apply the norm once.
  APRON_HD float value_shape(float r2) const {
    const float u = half_q(r2);
    const float t = fmaxf(0.0f, 1 - u);
    const float t2 = t * t;
    return t2 * t2 * (4 * u + 1);
  }
  APRON_HD float value(float r2) const {
    return value_norm * value_shape(r2);
  }
  // grad_a W_ab = gradient_norm * gradient_shape(r2) * (x_a - x_b): the shape (1 - q/2)^3 is
  // zero beyond the support (branch-free, like value_shape); gradient_norm is negative.
  APRON_HD float gradient_shape(float r2) const {
    const float t = fmaxf(0.0f, 1 - half_q(r2));
    return t * t * t;
  }
  APRON_HD float gradient_factor(float r2) const {
    return gradient_norm * gradient_shape(r2);
  }
};

// a / b with the GPU's fast reciprocal (2 ulp): enough for pair terms summed over ~100 neighbours.
APRON_HD inline float fast_divide(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdividef(a, b);
#else
  return a / b;
#endif
}

struct Params {
  Wendland kernel;
  float rest_density = 1000;  // rho0 [kg/m^3]
  float sound_speed = 10;     // c0 [m/s]
  float tait_b = 0;           // B = rho0 c0^2 / gamma [Pa]
  float gamma = 7;
  float fluid_mass = 0;      // [kg]
  float boundary_mass = 0;   // [kg]
  float alpha = 0.02f;       // Monaghan artificial viscosity, fluid-fluid
  float wall_alpha = 0.02f;  // the same against boundary particles (0: free slip)
  float viscosity = 0;       // kinematic viscosity nu of the laminar term, fluid-fluid [m^2/s]
  bool clamp_negative_pressure = true;
  Vec3 gravity{0, 0, -9.81f};
  // false: boundary particles add nothing to density or pressure and only repel fluid particles
  // with Monaghan's (1994) Lennard-Jones force, strength repulsion [m^2/s^2] within spacing [m].
  bool ghost_boundary = true;
  float repulsion = 0;
  float spacing = 0;
  // Divides the kernel gradient in the pair forces: 1 / M, M the SPH gradient of a linear field
  // on the particle lattice over the true gradient, makes that gradient exact there (1: none).
  float gradient_correction = 1;
  // Continuity density (SphConfig::continuity_density): vel.w carries each particle's density
  // from step to step.
  bool continuity_density = false;
  float density_diffusion = 0;  // delta h c0 [m^2/s]
  // d rho / d(g . r) at rest: rho0 / (c0^2 G), G the pair forces' gradient response, so the
  // diffusion leaves the hydrostatic density's gradient alone.
  float hydrostatic_density_slope = 0;

  // The constant factor of a neighbour of mass m's pair term (its sum times r_ab is the
  // acceleration): -m times the kernel gradient's norm, corrected.
  APRON_HD float pair_scale(float mass) const {
    return -mass * kernel.gradient_norm * gradient_correction;
  }

  APRON_HD float pressure(float rho) const {
    const float r = rho / rest_density;
    const float r2 = r * r, r4 = r2 * r2;
    const float p = tait_b * (r4 * r2 * r - 1);  // gamma = 7
    return clamp_negative_pressure && p < 0 ? 0 : p;
  }
  // Pressure of a boundary particle at x_b = x_a - r_ab as seen from fluid particle a.
  APRON_HD float wall_pressure(float p_a, float rho_a, Vec3 r_ab) const {
    const float p = p_a - rho_a * dot(gravity, r_ab);
    return clamp_negative_pressure && p < 0 ? 0 : p;
  }
};

// Device pointers of the fluid arrays (owned and ghosts, in cell order). Between the density and
// the acceleration pass, pos.w holds p/rho^2 and vel.w holds rho (stage_pair_terms), so the
// acceleration pass gets all it needs of a neighbour in two 16-byte loads.
struct FluidArrays {
  const Vec4* pos;
  const Vec4* vel;
  float* rho;
  float* pressure;
  Vec4* acc;
  const std::uint8_t* flags;
  std::size_t n;
  CellListView cells;
  // Written by the density pass (which fluid candidates are neighbours), read by the force pass.
  NeighbourRecord record;
};

// Boundary particles of a moving solid carry its number k + 1 in pos.w (static ones 0).
inline constexpr int kMaxMovingWalls = 8;

// Each moving wall's rigid velocity field, v(x) = linear + angular x (x - centre), and its
// acceleration field.
struct WallVelocities {
  Vec3 linear[kMaxMovingWalls];
  Vec3 angular[kMaxMovingWalls];
  Vec3 centre[kMaxMovingWalls];
  Vec3 linear_acceleration[kMaxMovingWalls];
  Vec3 angular_acceleration[kMaxMovingWalls];

  // The velocity of boundary particle b (at rest unless it belongs to a moving wall).
  APRON_HD Vec3 of(const Vec4& b) const {
    if (b.w < 0.5f) return {0, 0, 0};
    const int k = static_cast<int>(b.w) - 1;
    return linear[k] + cross(angular[k], xyz(b) - centre[k]);
  }
  // Its acceleration: a + alpha x r + omega x (omega x r).
  APRON_HD Vec3 acceleration_of(const Vec4& b) const {
    if (b.w < 0.5f) return {0, 0, 0};
    const int k = static_cast<int>(b.w) - 1;
    const Vec3 r = xyz(b) - centre[k];
    return linear_acceleration[k] + cross(angular_acceleration[k], r) +
           cross(angular[k], cross(angular[k], r));
  }
};

struct BoundaryArrays {
  const Vec4* pos;
  std::size_t n;
  CellListView cells;
  WallVelocities velocity{};        // the moving walls' (all zero when none moves)
  const float* pressure = nullptr;  // each boundary particle's (compute_wall_pressure), or none
};

// Each boundary particle's pressure from the fluid around it (Adami et al. 2012):
// p_w = (sum_f p_f W_wf + (g - a_w) . sum_f rho_f (x_w - x_f) W_wf) / sum_f W_wf, 0 with no fluid
// near; a_w the wall's acceleration (a piston's pushes the water as gravity does).
// Reads the fluid's density and pressure (owned and ghosts).
void compute_wall_pressure(const Params& params, const FluidArrays& fluid,
                           const BoundaryArrays& wall, DeviceVector<float>& out);

// rho_a = sum_b m_b W_ab over fluid and boundary neighbours, then p_a from the Tait equation.
// With continuity density rho_a is the one vel.w carries advanced by `elapsed` (the last step's
// dt) at the rate the positions and velocities that step reached give: symplectic Euler, as the
// positions are advanced with the new velocities (the rate from the old ones makes a forward
// Euler of the sound waves, which grows). Only owned particles are computed; ghosts receive
// their owner's values through the halo; vel.w gets the new density in stage_pair_terms.
void compute_density(const Params& params, const FluidArrays& fluid, const BoundaryArrays& wall,
                     float elapsed = 0);

// pos.w = p / rho^2 and vel.w = rho for all n particles (owned and ghosts), after the ghosts
// received their owners' density and pressure.
void stage_pair_terms(DeviceVector<Vec4>& pos, DeviceVector<Vec4>& vel,
                      const DeviceVector<float>& rho, const DeviceVector<float>& pressure,
                      std::size_t n);

// Pressure, artificial viscosity and gravity into acc, for owned particles (after
// stage_pair_terms).
void compute_acceleration(const Params& params, const FluidArrays& fluid,
                          const BoundaryArrays& wall);

// Symplectic Euler for owned particles: v += dt a; x += dt v; vel.w keeps the density it
// carries with continuity density (else 0). When `container` is non-null no
// particle crosses its faces: one that a step would carry through stops at the face and loses its
// normal velocity (an inelastic wall; a face at infinity is open).
void integrate(DeviceVector<Vec4>& pos, DeviceVector<Vec4>& vel, const DeviceVector<Vec4>& acc,
               const DeviceVector<std::uint8_t>& flags, float dt, bool carries_density,
               const Box* container);

struct Extremes {
  float max_speed = 0;
  float max_acceleration = 0;
};
Extremes owned_extremes(const DeviceVector<Vec4>& vel, const DeviceVector<Vec4>& acc,
                        const DeviceVector<std::uint8_t>& flags);

// Sums over owned fluid particles (float64 accumulators).
struct Totals {
  double count = 0;
  double kinetic = 0;    // sum 1/2 m v^2
  double potential = 0;  // sum -m g.x
  double max_speed = 0;
  double front_x = -1e300;  // largest x: the surge front
  std::size_t outside = 0;  // particles outside the container's walls (stays 0: they are clamped)
};
Totals owned_totals(const Params& params, const DeviceVector<Vec4>& pos,
                    const DeviceVector<Vec4>& vel, const DeviceVector<std::uint8_t>& flags,
                    const Box& container);

// The z of the highest owned fluid particle within `radius` of the vertical line through (x, y),
// or -infinity where there is none (a wave gauge's reading, before the particle's half spacing).
float highest_near(const DeviceVector<Vec4>& pos, const DeviceVector<std::uint8_t>& flags, float x,
                   float y, float radius);

// ---- Moving walls ----------------------------------------------------------------------------

// Each moving wall's rigid pose in float for the device: x = R (x0 - pivot) + pivot + t, as R
// (row-major, 9), pivot (3) and t (3).
struct WallPoses {
  float pose[kMaxMovingWalls][15];
};

// out[i] = rest[i] moved by the pose of its wall (rest[i].w = k + 1, kept).
void place_moving_walls(const DeviceVector<Vec4>& rest, const WallPoses& poses,
                        DeviceVector<Vec4>& out);

// Appends the points inside `box` to out (resized): the moving boundary particles near a rank.
void append_inside(const DeviceVector<Vec4>& points, const Box& box, DeviceVector<Vec4>& out);

// The force the fluid exerts on each moving wall k (boundary particles with w = k + 1): minus the
// wall's part of each owned particle's acceleration (the pressure and viscous pair terms of
// compute_acceleration) times its mass, summed in float64. Reads the density and pressure the
// last step computed.
struct WallForces {
  double force[kMaxMovingWalls][3];
};
WallForces moving_wall_forces(const Params& params, const FluidArrays& fluid,
                              const BoundaryArrays& wall);

}  // namespace apron::sph
