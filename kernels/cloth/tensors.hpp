// Per-vertex surface tensors of the Cosserat cloth (issue 17, "The method (from the seed)"; the
// estimation of Costa & Wu after Rusinkiewicz): vertex normal, local frame {t, b, n} from the
// vertex's reference edge, metric a_ab of the surface basis, curvature b_ab by least squares over
// the 1-ring; then strains against the reference state and their invariants.
//
// Conventions. The frame: n the unit normal from the ring's triangles with Max's weights (of the
// rest edges); t the reference edge (v -> first ring neighbour) projected into the plane normal
// to n; b = n x t. The curvature b_ab is in {t, b} with the sign of the equations,
// dn = b e along an edge e: positive on a sphere whose triangles face outward. The metric a_ab =
// a_a . a_b in the material coordinates of the vertex, i.e. the components of the ring's edges in
// the reference frame {T, B} at rest; so A_ab is the identity for every rest shape (up to the
// projection) and a_ab - A_ab measures stretch. All kernels are per-vertex gathers over the ring:
// no atomics, so results do not depend on thread scheduling.
#pragma once

#include <algorithm>
#include <cstddef>

#include "kernels/cloth/cloth_math.hpp"
#include "kernels/cloth/mesh.hpp"

namespace apron::cloth {

// What the kernels estimate per vertex, for one configuration of the mesh.
template <class T>
struct SurfaceTensors {
  DeviceVector<Vector3<T>> normal;   // n = a_3
  DeviceVector<Vector3<T>> tangent;  // t (b = n x t)
  DeviceVector<T> area;              // a third of the ring's triangle areas (integration weight)
  DeviceVector<Sym2<T>> metric;      // a_ab
  DeviceVector<Sym2<T>> curvature;   // b_ab in {t, b}
  DeviceVector<std::uint8_t> valid;  // 0: the ring cannot fit a_ab or b_ab (set to I and 0)
  void resize(std::size_t vertices) {
    normal.resize(vertices);
    tangent.resize(vertices);
    area.resize(vertices);
    metric.resize(vertices);
    curvature.resize(vertices);
    valid.resize(vertices);
  }
};

// The rest state, computed once: each ring edge's material coordinates (its components in the
// rest frame {T, B}, per ring entry) and misfit (edge_misfit, vertex_geometry.hpp), and the
// reference tensors A_ab, B_ab.
template <class T>
struct ReferenceState {
  DeviceVector<Vector2<T>> ring_coordinates;  // parallel to DeviceMesh::ring_neighbours
  DeviceVector<T> ring_misfit;                // likewise
  SurfaceTensors<T> rest;                     // rest.metric = A_ab, rest.curvature = B_ab
};

// Strains against the reference and the invariants the outputs and diagnostics show.
template <class T>
struct StrainInvariants {
  T mean_curvature;       // H = tr(b) / 2
  T gaussian_curvature;   // K = det(b)
  T stretch_trace;        // tr(A^-1 eps)
  T stretch_determinant;  // det(eps) / det(A)
  T bend_trace;           // tr(kappa)
  T bend_determinant;     // det(kappa)
};
template <class T>
struct Strains {
  DeviceVector<Sym2<T>> stretch;  // eps_ab = (a_ab - A_ab) / 2
  DeviceVector<Sym2<T>> bend;     // kappa_ab = -(b_ab - B_ab)
  DeviceVector<StrainInvariants<T>> invariants;
};

// n and the vertex area at `positions` (the mesh's connectivity).
template <class T>
void vertex_normals(const DeviceMesh<T>& mesh, const DeviceVector<Vector3<T>>& positions,
                    DeviceVector<Vector3<T>>& normal, DeviceVector<T>& area);

// The reference state of the mesh at `rest` positions (usually mesh.positions).
template <class T>
ReferenceState<T> make_reference(const DeviceMesh<T>& mesh, const DeviceVector<Vector3<T>>& rest);

// Frame, metric and curvature at `positions`.
template <class T>
void surface_tensors(const DeviceMesh<T>& mesh, const DeviceVector<Vector3<T>>& positions,
                     const ReferenceState<T>& reference, SurfaceTensors<T>& out);

// eps, kappa and the invariants of `current` against `reference`.
template <class T>
void strains(const SurfaceTensors<T>& current, const ReferenceState<T>& reference, Strains<T>& out);

// Principal curvatures (larger first) of a curvature tensor in an orthonormal frame.
template <class T>
APRON_HD inline Vector2<T> principal_curvatures(Sym2<T> b) {
  using std::sqrt;
  const T mean = trace(b) / T(2), half_gap = (b.xx - b.yy) / T(2);
  const T radius = sqrt(half_gap * half_gap + b.xy * b.xy);
  return {mean + radius, mean - radius};
}

// Principal strains (larger first): the eigenvalues of A^-1 eps, from its trace and determinant.
template <class T>
APRON_HD inline Vector2<T> principal_strains(Sym2<T> eps, Sym2<T> metric) {
  using std::max, std::sqrt;
  const T half_trace = trace_in_metric(eps, metric) / T(2);
  const T det = determinant(eps) / determinant(metric);
  const T radius = sqrt(max(half_trace * half_trace - det, T(0)));
  return {half_trace + radius, half_trace - radius};
}

}  // namespace apron::cloth
