#include "kernels/cloth/tensors.hpp"

#include "kernels/cloth/vertex_geometry.hpp"

namespace apron::cloth {
namespace {

template <class T>
struct VertexNormals {
  const Vector3<T>* x;
  RingView rings;
  Vector3<T>* normal;
  T* area;

  APRON_HD void operator()(std::size_t v) const {
    const auto u = static_cast<std::uint32_t>(v);
    normal[v] = vertex_normal(FromArray<T>{x}, rings, u);
    area[v] = vertex_area(FromArray<T>{x}, rings, u);
  }
};

// Each ring edge's components in the rest frame {T, B}: the vertex's material coordinates.
template <class T>
struct RingCoordinates {
  const Vector3<T>* x;
  const Vector3<T>* normal;
  RingView rings;
  Vector2<T>* coordinates;

  APRON_HD void operator()(std::size_t v) const {
    const Ring ring = rings.ring(v);
    const Vector3<T> xv = x[v], n = normal[v];
    const Vector3<T> t = frame_tangent(FromArray<T>{x}, rings, ring, xv, n), b = cross(n, t);
    for (std::uint32_t k = ring.begin; k < ring.end; ++k) {
      const Vector3<T> e = x[rings.neighbour(k)] - xv;
      coordinates[k] = {dot(e, t), dot(e, b)};
    }
  }
};

// Each ring edge's misfit at rest (edge_misfit; 0 where the fit fails): what the hourglass term
// measures from.
template <class T>
struct RestMisfit {
  const Vector3<T>* x;
  const Vector2<T>* coordinates;
  RingView rings;
  T* misfit;

  APRON_HD void operator()(std::size_t v) const {
    const Ring ring = rings.ring(v);
    const Vector3<T> xv = x[v];
    Vector3<T> p1, p2;
    const bool fitted = fit_basis(FromArray<T>{x}, rings, coordinates, ring, xv, p1, p2);
    for (std::uint32_t k = ring.begin; k < ring.end; ++k)
      misfit[k] = fitted ? edge_misfit(x[rings.neighbour(k)] - xv, coordinates[k], p1, p2) : T(0);
  }
};

template <class T>
struct SurfaceTensorsKernel {
  const Vector3<T>* x;
  const Vector3<T>* normal;
  const Vector2<T>* coordinates;
  RingView rings;
  Vector3<T>* tangent;
  Sym2<T>* metric;
  Sym2<T>* curvature;
  std::uint8_t* valid;

  APRON_HD void operator()(std::size_t v) const {
    Vector3<T> t;
    Sym2<T> a, c;
    valid[v] = vertex_tensors(FromArray<T>{x}, FromArray<T>{normal}, rings, coordinates,
                              static_cast<std::uint32_t>(v), normal[v], t, a, c);
    tangent[v] = t;
    metric[v] = a;
    curvature[v] = c;
  }
};

template <class T>
struct StrainsKernel {
  const Sym2<T>* metric;
  const Sym2<T>* curvature;
  const Sym2<T>* rest_metric;
  const Sym2<T>* rest_curvature;
  Sym2<T>* stretch;
  Sym2<T>* bend;
  StrainInvariants<T>* invariants;

  APRON_HD void operator()(std::size_t v) const {
    const Sym2<T> a = metric[v], b = curvature[v], rest_a = rest_metric[v];
    const Sym2<T> eps = T(0.5) * (a - rest_a), kappa = T(-1) * (b - rest_curvature[v]);
    stretch[v] = eps;
    bend[v] = kappa;
    invariants[v] = {trace(b) / T(2),
                     determinant(b),
                     trace_in_metric(eps, rest_a),
                     determinant(eps) / determinant(rest_a),
                     trace(kappa),
                     determinant(kappa)};
  }
};

}  // namespace

template <class T>
void vertex_normals(const DeviceMesh<T>& mesh, const DeviceVector<Vector3<T>>& positions,
                    DeviceVector<Vector3<T>>& normal, DeviceVector<T>& area) {
  const std::size_t n = mesh.vertices();
  normal.resize(n);
  area.resize(n);
  for_each_index(n, VertexNormals<T>{raw(positions), ring_view(mesh), raw(normal), raw(area)});
}

template <class T>
ReferenceState<T> make_reference(const DeviceMesh<T>& mesh, const DeviceVector<Vector3<T>>& rest) {
  ReferenceState<T> ref;
  ref.rest.resize(mesh.vertices());
  vertex_normals(mesh, rest, ref.rest.normal, ref.rest.area);
  ref.ring_coordinates.resize(mesh.ring_neighbours.size());
  for_each_index(mesh.vertices(), RingCoordinates<T>{raw(rest), raw(ref.rest.normal),
                                                     ring_view(mesh), raw(ref.ring_coordinates)});
  ref.ring_misfit.resize(mesh.ring_neighbours.size());
  for_each_index(mesh.vertices(), RestMisfit<T>{raw(rest), raw(ref.ring_coordinates),
                                                ring_view(mesh), raw(ref.ring_misfit)});
  surface_tensors(mesh, rest, ref, ref.rest);
  return ref;
}

template <class T>
void surface_tensors(const DeviceMesh<T>& mesh, const DeviceVector<Vector3<T>>& positions,
                     const ReferenceState<T>& reference, SurfaceTensors<T>& out) {
  out.resize(mesh.vertices());
  vertex_normals(mesh, positions, out.normal, out.area);
  for_each_index(
      mesh.vertices(),
      SurfaceTensorsKernel<T>{raw(positions), raw(out.normal), raw(reference.ring_coordinates),
                              ring_view(mesh), raw(out.tangent), raw(out.metric),
                              raw(out.curvature), raw(out.valid)});
}

template <class T>
void strains(const SurfaceTensors<T>& current, const ReferenceState<T>& reference,
             Strains<T>& out) {
  const std::size_t n = current.metric.size();
  out.stretch.resize(n);
  out.bend.resize(n);
  out.invariants.resize(n);
  for_each_index(n, StrainsKernel<T>{raw(current.metric), raw(current.curvature),
                                     raw(reference.rest.metric), raw(reference.rest.curvature),
                                     raw(out.stretch), raw(out.bend), raw(out.invariants)});
}

#define APRON_CLOTH_INSTANTIATE(T)                                                        \
  template void vertex_normals<T>(const DeviceMesh<T>&, const DeviceVector<Vector3<T>>&,  \
                                  DeviceVector<Vector3<T>>&, DeviceVector<T>&);           \
  template ReferenceState<T> make_reference<T>(const DeviceMesh<T>&,                      \
                                               const DeviceVector<Vector3<T>>&);          \
  template void surface_tensors<T>(const DeviceMesh<T>&, const DeviceVector<Vector3<T>>&, \
                                   const ReferenceState<T>&, SurfaceTensors<T>&);         \
  template void strains<T>(const SurfaceTensors<T>&, const ReferenceState<T>&, Strains<T>&);
APRON_CLOTH_INSTANTIATE(float)
APRON_CLOTH_INSTANTIATE(double)
#undef APRON_CLOTH_INSTANTIATE

}  // namespace apron::cloth
