// The Cosserat-surface energy of issue 17 per vertex and in total, and its exact gradient with
// respect to the vertex positions, in float64 (the internal forces are its negative).
//
// Energy per unit rest area (the "mu A"):
//   W = Phi^abgd eps_ab eps_gd + Psi^abgd kappa_ab kappa_gd + Theta^abgd eps_ab kappa_gd,
//   Phi = zeta P, Psi = xi P, Theta = phi P,  P^abgd = A^ab A^gd + A^ag A^bd + A^ad A^bg,
// so P X Y = tr(A^-1 X) tr(A^-1 Y) + 2 tr(A^-1 X A^-1 Y) for symmetric X, Y. The discrete energy
// is E = sum_v W_v |V_v| with |V_v| the rest vertex area (a third of its ring's triangles).
#pragma once

#include <cstdint>

#include "kernels/cloth/cloth_math.hpp"
#include "kernels/cloth/mesh.hpp"
#include "kernels/cloth/tensors.hpp"

namespace apron::cloth {

struct Material {
  double zeta = 1;  // stretch stiffness
  double xi = 1;    // bend stiffness
  double phi = 0;   // stretch-bend coupling ("wrinkling")
};

// P^abgd X_ab Y_gd in the metric A (see above).
template <class S, class T>
APRON_HD inline S metric_contraction(Sym2<S> x, Sym2<S> y, Sym2<T> metric) {
  const T det = determinant(metric);
  const Sym2<S> inverse{S(metric.yy / det), S(-metric.xy / det), S(metric.xx / det)};
  // M = A^-1 X and N = A^-1 Y as general 2x2 matrices (row, column).
  const S m00 = inverse.xx * x.xx + inverse.xy * x.xy, m01 = inverse.xx * x.xy + inverse.xy * x.yy;
  const S m10 = inverse.xy * x.xx + inverse.yy * x.xy, m11 = inverse.xy * x.xy + inverse.yy * x.yy;
  const S n00 = inverse.xx * y.xx + inverse.xy * y.xy, n01 = inverse.xx * y.xy + inverse.xy * y.yy;
  const S n10 = inverse.xy * y.xx + inverse.yy * y.xy, n11 = inverse.xy * y.xy + inverse.yy * y.yy;
  return (m00 + m11) * (n00 + n11) + S(2) * (m00 * n00 + m01 * n10 + m10 * n01 + m11 * n11);
}

// W from the strains at a vertex and its rest metric.
template <class S, class T>
APRON_HD inline S energy_density(Sym2<S> eps, Sym2<S> kappa, Sym2<T> rest_metric,
                                 const Material& m) {
  return S(m.zeta) * metric_contraction(eps, eps, rest_metric) +
         S(m.xi) * metric_contraction(kappa, kappa, rest_metric) +
         S(m.phi) * metric_contraction(eps, kappa, rest_metric);
}

// What the gradient needs beyond the mesh: each vertex's 2-ring (itself, its ring and their
// rings, without repeats) in CSR form. W_v depends on exactly the positions of v's 2-ring (the
// normals of its neighbours read their rings), so x_j moves W_v only for v in j's 2-ring.
struct EnergyModel {
  Material material;
  DeviceVector<std::uint32_t> two_ring_offsets, two_ring;
};
EnergyModel make_energy_model(const DeviceMesh<double>& mesh, const Material& material);

// W per vertex at `positions`.
void energy_density(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                    const ReferenceState<double>& reference, const EnergyModel& model,
                    DeviceVector<double>& density);

// E = sum_v W_v |V_v|.
double total_energy(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                    const ReferenceState<double>& reference, const EnergyModel& model);

// dE/dx_j for every vertex j, exact: forward-mode derivatives (dual.hpp) of each W_v of j's
// 2-ring with respect to x_j, gathered per j (no atomics: independent of thread scheduling).
void energy_gradient(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                     const ReferenceState<double>& reference, const EnergyModel& model,
                     DeviceVector<Vector3<double>>& gradient);

}  // namespace apron::cloth
