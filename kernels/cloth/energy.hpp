// The Cosserat-surface energy of issue 17 per vertex and in total, and its exact gradient with
// respect to the vertex positions, in float64 (the internal forces are its negative).
//
// Energy per unit rest area (the "mu A"):
//   W = Phi^abgd eps_ab eps_gd + Psi^abgd kappa_ab kappa_gd + Theta^abgd eps_ab kappa_gd,
//   Phi = zeta P, Psi = xi P, Theta = phi P,  P^abgd = A^ab A^gd + A^ag A^bd + A^ad A^bg,
// so P X Y = tr(A^-1 X) tr(A^-1 Y) + 2 tr(A^-1 X A^-1 Y) for symmetric X, Y. The discrete energy
// is E = sum_v W_v |V_v| with |V_v| the rest vertex area (a third of its ring's triangles).
// Hourglass control adds zeta h M_v to W_v, M_v the ring's mean squared edge strain that the
// fitted metric does not explain (ring_misfit, vertex_geometry.hpp): zero under any affine map of
// a flat ring and any rigid motion, it gives the fit's blind modes (a vertex moving against a
// symmetric ring) the membrane's stiffness. h = 0 is the energy.
#pragma once

#include <cstdint>

#include "kernels/cloth/cloth_math.hpp"
#include "kernels/cloth/mesh.hpp"
#include "kernels/cloth/tensors.hpp"

namespace apron::cloth {

struct Material {
  double zeta = 1;       // stretch stiffness
  double xi = 1;         // bend stiffness
  double phi = 0;        // stretch-bend coupling ("wrinkling")
  double hourglass = 0;  // h, the hourglass control's weight relative to zeta
};

// P^abgd X_ab Y_gd in the metric A (see above).
template <class S, class T>
APRON_HD inline S metric_contraction(Sym2<S> x, Sym2<S> y, Sym2<T> metric) {
  const T det = determinant(metric);
  const Sym2<S> inverse{S(quotient(metric.yy, det)), S(quotient(-metric.xy, det)),
                        S(quotient(metric.xx, det))};
  // M = A^-1 X and N = A^-1 Y as general 2x2 matrices (row, column).
  const S m00 = inverse.xx * x.xx + inverse.xy * x.xy, m01 = inverse.xx * x.xy + inverse.xy * x.yy;
  const S m10 = inverse.xy * x.xx + inverse.yy * x.xy, m11 = inverse.xy * x.xy + inverse.yy * x.yy;
  const S n00 = inverse.xx * y.xx + inverse.xy * y.xy, n01 = inverse.xx * y.xy + inverse.xy * y.yy;
  const S n10 = inverse.xy * y.xx + inverse.yy * y.xy, n11 = inverse.xy * y.xy + inverse.yy * y.yy;
  return (m00 + m11) * (n00 + n11) + S(2) * (m00 * n00 + m01 * n10 + m10 * n01 + m11 * n11);
}

// The gradient of P X Y with respect to X's stored components (xx, xy, yy; the xy component counted
// once, as a Sym2 stores it): P is bilinear, so this is tr(A^-1 Y) d tr(A^-1 X) + 2 d tr(A^-1 X
// A^-1 Y), with tr(A^-1 X A^-1 Y) = X : (A^-1 Y A^-1).
template <class T>
APRON_HD inline Sym2<T> metric_contraction_gradient(Sym2<T> y, Sym2<T> metric) {
  const T det = determinant(metric);
  const Sym2<T> inverse{quotient(metric.yy, det), quotient(-metric.xy, det),
                        quotient(metric.xx, det)};
  // N = A^-1 Y, then A^-1 Y A^-1 = N A^-1 (symmetric).
  const T n00 = inverse.xx * y.xx + inverse.xy * y.xy, n01 = inverse.xx * y.xy + inverse.xy * y.yy;
  const T n10 = inverse.xy * y.xx + inverse.yy * y.xy, n11 = inverse.xy * y.xy + inverse.yy * y.yy;
  const T txx = n00 * inverse.xx + n01 * inverse.xy, txy = n00 * inverse.xy + n01 * inverse.yy;
  const T tyy = n10 * inverse.xy + n11 * inverse.yy;
  const T tr = n00 + n11;
  return {tr * inverse.xx + T(2) * txx, T(2) * (tr * inverse.xy + T(2) * txy),
          tr * inverse.yy + T(2) * tyy};
}

// W from the strains at a vertex and its rest metric.
template <class S, class T>
APRON_HD inline S energy_density(Sym2<S> eps, Sym2<S> kappa, Sym2<T> rest_metric,
                                 const Material& m) {
  return S(m.zeta) * metric_contraction(eps, eps, rest_metric) +
         S(m.xi) * metric_contraction(kappa, kappa, rest_metric) +
         S(m.phi) * metric_contraction(eps, kappa, rest_metric);
}

// The precision of energy_gradient past the strains (vertex_tensors_adjoint): float64
// throughout (the tests' oracle path), or mixed (float32 where only relative accuracy matters,
// the simulation's default; max |g - g64| / max |g64| measured in the tests).
enum class GradientPrecision { float64, mixed };

// Per-ring-entry adjoints, laid out per closed 1-ring like the ring CSR with one slot in front of
// each ring for the vertex itself: vertex v's slot is ring_offsets[v] + v, that of its ring entry k
// is k + v + 1 (vertex_adjoint.hpp).
template <class R>
struct AdjointSlots {
  DeviceVector<Vector3<R>> x, n;  // d(W_v |V_v|)/dx_i and /dn_i
  void resize(std::size_t slots) {
    x.resize(slots);
    n.resize(slots);
  }
};

// What the gradient needs beyond the mesh, built once per mesh by make_energy_model.
//   twin_slot: per ring entry (v -> u), the slot of the entry of u's ring that points back to v,
//     so that per-vertex gathers can read what each neighbour wrote about them.
//   normal, normal_inverse_length, normal_sum_adjoint and the slots of the model's precision:
//     energy_gradient's scratch, sized here and reused by every call (mutable: a const model is
//     still one caller's workspace; two concurrent gradients need two models).
//   two_ring_offsets, two_ring: each vertex's 2-ring (itself, its ring and their rings, without
//     repeats), for energy_gradient_forward only, which builds them on its first call. W_v depends
//     on exactly the positions of v's 2-ring (the normals of its neighbours read their rings).
//   staged_slots: the CUDA backend's per-vertex adjoint writes its slots through shared memory
//     (the same gradient, faster); false runs the portable kernel, which the tests compare it
//     with. Other backends always run the portable one.
struct EnergyModel {
  Material material;
  GradientPrecision precision = GradientPrecision::float64;
  bool staged_slots = true;
  DeviceVector<std::uint32_t> twin_slot;
  mutable DeviceVector<Vector3<double>> normal, normal_sum_adjoint;
  mutable DeviceVector<double> normal_inverse_length;
  mutable AdjointSlots<double> slots64;
  mutable AdjointSlots<float> slots32;
  mutable DeviceVector<std::uint32_t> two_ring_offsets, two_ring;
};
EnergyModel make_energy_model(const DeviceMesh<double>& mesh, const Material& material,
                              GradientPrecision precision = GradientPrecision::float64);

// W per vertex at `positions`.
void energy_density(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                    const ReferenceState<double>& reference, const EnergyModel& model,
                    DeviceVector<double>& density);

// What the outputs and diagnostics show of a vertex's deformation: W split into its terms, the
// principal strains (the eigenvalues of A^-1 eps, larger first; Green's strain, (l^2 - 1) / 2 for
// a stretch ratio l) and the mean and Gaussian curvature of the surface now.
struct VertexMeasures {
  double stretch_energy, bend_energy, coupling_energy, hourglass_energy;  // [J/m^2]: W = sum
  double strain_max, strain_min;
  double mean_curvature, gaussian_curvature;  // H = tr(b) / 2 [1/m], K = det(b) [1/m^2]
  APRON_HD double energy() const {
    return stretch_energy + bend_energy + coupling_energy + hourglass_energy;
  }
};

// The measures of every vertex at `positions` (the same strains as energy_density's).
void vertex_measures(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                     const ReferenceState<double>& reference, const EnergyModel& model,
                     DeviceVector<VertexMeasures>& out);

// W_v |V_v| per vertex at `positions`: the terms of total_energy.
void vertex_energies(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                     const ReferenceState<double>& reference, const EnergyModel& model,
                     DeviceVector<double>& out);

// E = sum_v W_v |V_v|.
double total_energy(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                    const ReferenceState<double>& reference, const EnergyModel& model);

// dE/dx_j for every vertex j, exact (the derivative of the same discrete energy, to round-off) and
// deterministic (per-vertex gathers in CSR order, no atomics). Four passes over the vertices:
//   1. the normals n_k (and the inverse lengths of their unnormalised sums);
//   2. per vertex v, with the normals as inputs, the adjoint of W_v |V_v| (vertex_adjoint.hpp):
//      d(W_v |V_v|)/dx_i and d(W_v |V_v|)/dn_i for i in v's closed 1-ring, into the model's slots;
//   3. per vertex k, the normal's adjoint a_k = sum over v in k's closed ring of dW_v/dn_k, taken
//      back through the normalisation to that of k's unnormalised sum;
//   4. per vertex j, the sum of the position slots that name j (its own and its neighbours'),
//      plus the normals' dependence on x_j, pulled from the sums' adjoints of j's ring triangles.
// Writes into the model's scratch (see EnergyModel).
void energy_gradient(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                     const ReferenceState<double>& reference, const EnergyModel& model,
                     DeviceVector<Vector3<double>>& gradient);

// The same gradient in forward mode, the test oracle of energy_gradient: for each vertex j, every
// W_v of j's 2-ring re-evaluated on positions carrying derivatives along x_j (dual.hpp), the
// normals recomputed from them, and gathered per j. Slow (about 19 energy evaluations of 7
// normals each per vertex); it shares only vertex_geometry.hpp with energy_gradient.
void energy_gradient_forward(const DeviceMesh<double>& mesh,
                             const DeviceVector<Vector3<double>>& positions,
                             const ReferenceState<double>& reference, const EnergyModel& model,
                             DeviceVector<Vector3<double>>& gradient);

}  // namespace apron::cloth
