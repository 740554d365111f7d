// Contact with the colliders as a barrier in the implicit step's incremental potential
// (cloth.implicit.contact: barrier), after IPC (Li et al., "Incremental Potential Contact", 2020):
// each free vertex i adds
//   kappa_i b(s_i),  b(s) = -(s - band)^2 ln(s / band) for 0 < s < band, 0 beyond,
// s_i = d(x0 + dt v_i) - inner its gap, d the distance from a collider's surface (negative inside),
// kappa_i = m_i stiffness, stiffness = cloth.implicit.barrier_stiffness / dt^2 with dt the
// configured step: one potential for the whole run, the same in a halved step or a short last one
// (a stiffness that followed the sub-step changed the barrier's energy under a resting sheet). At
// the default, 1e4, the drape's top rests 0.24 mm into a 5 mm band and its rest shape is within
// 0.85% of the explicit run's; at 1 the top sagged 3.4 mm under the skirt's weight (8.7%).
// The barrier is a potential, so Newton's step minimises one smooth function: no row is held or
// released, nothing moves the iterate outside the line search, and backward Euler's energy bound
// holds across first contact (a constraint's prescribed approach velocity could do work on the
// sheet). Below 1% of the band b is continued by its second-order Taylor polynomial, so that an
// iterate (or a sheet placed) past the barrier has a finite, steeply rising energy instead of a
// singular one; the projection after the step keeps vertices `inner` out, as a last resort.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/cloth/implicit.hpp"
#include "kernels/cloth/mesh_colliders.hpp"
#include "kernels/cloth/motion.hpp"

namespace apron::cloth {

// Where the barrier acts: from `inner` (its singular surface, measured from the collider's
// surface) to inner + band (where it vanishes with its first two derivatives).
struct ContactBarrier {
  double inner = 0, band = 0;
  double stiffness = 0;  // kappa_i / m_i [1/s^2]
};

// b(s) and its first two derivatives (band > 0).
struct BarrierValue {
  double value = 0, slope = 0, curvature = 0;
};
APRON_HD inline BarrierValue barrier_value(double s, double band) {
  BarrierValue b;
  if (!(s < band)) return b;
  const double lowest = 1e-2 * band;  // the Taylor continuation below it
  const double t = s > lowest ? s : lowest;
  const double g = t - band, l = std::log(t / band);
  b.value = -g * g * l;
  b.slope = -2 * g * l - g * g / t;
  b.curvature = -2 * l - 4 * g / t + g * g / (t * t);
  if (s < lowest) {
    const double d = s - lowest;
    b.value += d * (b.slope + 0.5 * d * b.curvature);
    b.slope += d * b.curvature;
  }
  return b;
}

// Per row, at the end points x0 + dt v, summed over the colliders:
//   impulse_i = -dt kappa_i b'(s) n (the row's share of Newton's residual: the barrier's push over
//   the step, n the collider's outward normal at the end point), and
//   curvature_i = dt^2 kappa_i b''(s) n n^T (its Hessian in v, the distance's own curvature
//   dropped: b' < 0 makes that part negative semi-definite on convex colliders).
// barrier_terms overwrites both from the analytic colliders; add_mesh_barrier_terms adds one mesh
// collider's (at its pose at the step's end). Pinned rows get zeros.
void barrier_terms(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& end,
                   const DeviceVector<Collider>& colliders, std::size_t count, Vectors& impulse,
                   DeviceVector<Block3>& curvature);
void add_mesh_barrier_terms(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& end,
                            const MeshColliderStep& collider, std::size_t count, Vectors& impulse,
                            DeviceVector<Block3>& curvature);
// out_i = kappa_i b(s_i) at the end points (the line search's share of each row), overwriting /
// adding as above.
void barrier_energies(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& end,
                      const DeviceVector<Collider>& colliders, std::size_t count,
                      DeviceVector<double>& out);
void add_mesh_barrier_energies(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& end,
                               const MeshColliderStep& collider, std::size_t count,
                               DeviceVector<double>& out);
// out_i += curvature_i q_i.
void add_barrier_product(const DeviceVector<Block3>& curvature, const Vectors& q, std::size_t count,
                         Vectors& out);
// The rows friction acts on over the step, lagged at `points` (x0 at the step's start) as IPC lags
// them: each row within the band there of the collider that pushes it hardest gets that collider's
// normal, Coulomb coefficient and velocity, and its normal impulse over the step, dt kappa |b'(s)|
// (implicit.hpp's friction_force then reads them); the other rows are free. barrier_friction_rows
// overwrites from the analytic colliders, add_mesh_barrier_friction_rows takes the rows a mesh
// collider pushes harder (at `pose`, its velocity from the step's two poses).
void barrier_friction_rows(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& points,
                           const DeviceVector<Collider>& colliders, std::size_t count,
                           DeviceVector<ContactConstraint>& out);
void add_mesh_barrier_friction_rows(const ImplicitSystem& s, const ContactBarrier& b,
                                    const Vectors& points, const MeshColliderStep& collider,
                                    const BodyPose& pose, std::size_t count,
                                    DeviceVector<ContactConstraint>& out);
// IPC's lagged friction, iterated: after a solution the rows are taken again at its end points
// (the impulses the barrier gave in the step, where it touched). changed_i = 1 where a row gained
// or lost friction or its Coulomb bound mu p moved by more than `tolerance` of itself (every flag
// written).
void compare_friction_rows(const DeviceVector<ContactConstraint>& before,
                           const DeviceVector<ContactConstraint>& after, double tolerance,
                           std::size_t count, DeviceVector<std::uint8_t>& changed);
}  // namespace apron::cloth
