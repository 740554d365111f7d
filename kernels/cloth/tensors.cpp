#include "kernels/cloth/tensors.hpp"

#include "kernels/common/vec.hpp"  // load()

namespace apron::cloth {
namespace {

// Vertex v's ring in the CSR arrays: entries [begin, end), closed unless v is on the boundary.
struct Ring {
  std::uint32_t begin, end;
  bool open;
  APRON_HD std::uint32_t size() const { return end - begin; }
  // Entry after k (k in [begin, end)), wrapping around a closed ring.
  APRON_HD std::uint32_t next(std::uint32_t k) const { return k + 1 < end ? k + 1 : begin; }
  // Triangles of the ring: one per consecutive pair, plus the closing pair of a closed ring.
  APRON_HD std::uint32_t triangles() const { return open ? size() - 1 : size(); }
};

APRON_HD inline Ring ring_of(const std::uint32_t* offsets, const std::uint8_t* boundary,
                             std::size_t v) {
  return {load(offsets + v), load(offsets + v + 1), load(boundary + v) != 0};
}

template <class T>
struct VertexNormals {
  const Vector3<T>* x;
  const std::uint32_t* offsets;
  const std::uint32_t* neighbours;
  const std::uint8_t* boundary;
  Vector3<T>* normal;
  T* area;

  APRON_HD void operator()(std::size_t v) const {
    const Ring ring = ring_of(offsets, boundary, v);
    const Vector3<T> xv = x[v];
    Vector3<T> sum{0, 0, 0};
    T twice_area = 0;
    std::uint32_t k = ring.begin;
    for (std::uint32_t n = 0; n < ring.triangles(); ++n, k = ring.next(k)) {
      const Vector3<T> e1 = x[neighbours[k]] - xv, e2 = x[neighbours[ring.next(k)]] - xv;
      const Vector3<T> c = cross(e1, e2);
      // Max's weights (1999): exact on a sphere, and on the irregular cylinder of the tests a
      // curvature error 7x smaller than with area weights (which make it O(1) there).
      sum += (T(1) / (dot(e1, e1) * dot(e2, e2))) * c;
      twice_area += norm(c);
    }
    normal[v] = normalized(sum);
    area[v] = twice_area / T(6);
  }
};

// t: the reference edge v -> first neighbour, in the plane normal to n.
template <class T>
APRON_HD inline Vector3<T> frame_tangent(const Vector3<T>* x, const std::uint32_t* neighbours,
                                         const Ring& ring, Vector3<T> xv, Vector3<T> n) {
  return normalized(tangential(x[neighbours[ring.begin]] - xv, n));
}

// Each ring edge's components in the rest frame {T, B}: the vertex's material coordinates.
template <class T>
struct RingCoordinates {
  const Vector3<T>* x;
  const Vector3<T>* normal;
  const std::uint32_t* offsets;
  const std::uint32_t* neighbours;
  const std::uint8_t* boundary;
  Vector2<T>* coordinates;

  APRON_HD void operator()(std::size_t v) const {
    const Ring ring = ring_of(offsets, boundary, v);
    const Vector3<T> xv = x[v], n = normal[v];
    const Vector3<T> t = frame_tangent(x, neighbours, ring, xv, n), b = cross(n, t);
    for (std::uint32_t k = ring.begin; k < ring.end; ++k) {
      const Vector3<T> e = x[neighbours[k]] - xv;
      coordinates[k] = {dot(e, t), dot(e, b)};
    }
  }
};

// The surface basis a_1, a_2: the least-squares fit of e_k = th1_k a_1 + th2_k a_2 over the ring
// (th the edge's material coordinates), each vector then rotated into the plane normal to n (its
// length kept). Returns a_ab; false when the ring's material coordinates are collinear.
template <class T>
APRON_HD inline bool fit_metric(const Vector3<T>* x, const std::uint32_t* neighbours,
                                const Vector2<T>* coordinates, const Ring& ring, Vector3<T> xv,
                                Vector3<T> n, Sym2<T>& metric) {
  T g11 = 0, g12 = 0, g22 = 0;
  Vector3<T> r1{0, 0, 0}, r2{0, 0, 0};
  for (std::uint32_t k = ring.begin; k < ring.end; ++k) {
    const Vector3<T> e = x[neighbours[k]] - xv;
    const Vector2<T> th = coordinates[k];
    g11 += th.x * th.x;
    g12 += th.x * th.y;
    g22 += th.y * th.y;
    r1 += th.x * e;
    r2 += th.y * e;
  }
  const T det = g11 * g22 - g12 * g12;
  if (!(det > T(1e-6) * (g11 + g22) * (g11 + g22))) return false;
  Vector3<T> a1 = (T(1) / det) * (g22 * r1 - g12 * r2), a2 = (T(1) / det) * (g11 * r2 - g12 * r1);
  a1 = norm(a1) * normalized(tangential(a1, n));
  a2 = norm(a2) * normalized(tangential(a2, n));
  metric = {dot(a1, a1), dot(a1, a2), dot(a2, a2)};
  return true;
}

// b_ab from the four equations per ring edge (Rusinkiewicz's dn.t = b11 t_k + b12 b_k,
// dn.b = b12 t_k + b22 b_k, each times t_k and b_k), solved by least squares. Edges are scaled by
// the reference edge's length so that the normal equations stay O(1) in float at any mesh size.
template <class T>
APRON_HD inline bool fit_curvature(const Vector3<T>* x, const Vector3<T>* normal,
                                   const std::uint32_t* neighbours, const Ring& ring, Vector3<T> xv,
                                   Vector3<T> n, Vector3<T> t, Vector3<T> b, Sym2<T>& curvature) {
  const T scale = T(1) / norm(x[neighbours[ring.begin]] - xv);
  Sym3System<T> fit;
  for (std::uint32_t k = ring.begin; k < ring.end; ++k) {
    const std::uint32_t j = neighbours[k];
    const Vector3<T> e = x[j] - xv, dn = normal[j] - n;
    const T tk = scale * dot(e, t), bk = scale * dot(e, b), dnt = dot(dn, t), dnb = dot(dn, b);
    fit.add_row(tk * tk, tk * bk, T(0), dnt * tk);
    fit.add_row(T(0), bk * tk, bk * bk, dnb * bk);
    fit.add_row(tk * bk, bk * bk, T(0), dnt * bk);
    fit.add_row(T(0), tk * tk, tk * bk, dnb * tk);
  }
  T u[3];
  if (!fit.solve(u)) return false;
  curvature = {scale * u[0], scale * u[1], scale * u[2]};
  return true;
}

template <class T>
struct SurfaceTensorsKernel {
  const Vector3<T>* x;
  const Vector3<T>* normal;
  const Vector2<T>* coordinates;
  const std::uint32_t* offsets;
  const std::uint32_t* neighbours;
  const std::uint8_t* boundary;
  Vector3<T>* tangent;
  Sym2<T>* metric;
  Sym2<T>* curvature;
  std::uint8_t* valid;

  APRON_HD void operator()(std::size_t v) const {
    const Ring ring = ring_of(offsets, boundary, v);
    const Vector3<T> xv = x[v], n = normal[v];
    const Vector3<T> t = frame_tangent(x, neighbours, ring, xv, n), b = cross(n, t);
    tangent[v] = t;
    Sym2<T> a{1, 0, 1}, c{0, 0, 0};
    const bool ok = fit_metric(x, neighbours, coordinates, ring, xv, n, a) &&
                    fit_curvature(x, normal, neighbours, ring, xv, n, t, b, c);
    metric[v] = a;
    curvature[v] = ok ? c : Sym2<T>{0, 0, 0};
    valid[v] = ok;
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

template <class T>
void resize_tensors(SurfaceTensors<T>& s, std::size_t n) {
  s.normal.resize(n);
  s.tangent.resize(n);
  s.area.resize(n);
  s.metric.resize(n);
  s.curvature.resize(n);
  s.valid.resize(n);
}

}  // namespace

template <class T>
void vertex_normals(const DeviceMesh<T>& mesh, const DeviceVector<Vector3<T>>& positions,
                    DeviceVector<Vector3<T>>& normal, DeviceVector<T>& area) {
  const std::size_t n = mesh.vertices();
  normal.resize(n);
  area.resize(n);
  for_each_index(n,
                 VertexNormals<T>{raw(positions), raw(mesh.ring_offsets), raw(mesh.ring_neighbours),
                                  raw(mesh.boundary), raw(normal), raw(area)});
}

template <class T>
ReferenceState<T> make_reference(const DeviceMesh<T>& mesh, const DeviceVector<Vector3<T>>& rest) {
  ReferenceState<T> ref;
  resize_tensors(ref.rest, mesh.vertices());
  vertex_normals(mesh, rest, ref.rest.normal, ref.rest.area);
  ref.ring_coordinates.resize(mesh.ring_neighbours.size());
  for_each_index(
      mesh.vertices(),
      RingCoordinates<T>{raw(rest), raw(ref.rest.normal), raw(mesh.ring_offsets),
                         raw(mesh.ring_neighbours), raw(mesh.boundary), raw(ref.ring_coordinates)});
  surface_tensors(mesh, rest, ref, ref.rest);
  return ref;
}

template <class T>
void surface_tensors(const DeviceMesh<T>& mesh, const DeviceVector<Vector3<T>>& positions,
                     const ReferenceState<T>& reference, SurfaceTensors<T>& out) {
  resize_tensors(out, mesh.vertices());
  vertex_normals(mesh, positions, out.normal, out.area);
  for_each_index(mesh.vertices(),
                 SurfaceTensorsKernel<T>{
                     raw(positions), raw(out.normal), raw(reference.ring_coordinates),
                     raw(mesh.ring_offsets), raw(mesh.ring_neighbours), raw(mesh.boundary),
                     raw(out.tangent), raw(out.metric), raw(out.curvature), raw(out.valid)});
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
