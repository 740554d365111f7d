// The per-vertex estimation of issue 17 as device functions, templated on where positions and
// normals come from: arrays (the tensor kernels), or positions carrying derivatives with the
// normals recomputed from them (the energy gradient, energy.cpp), so that both run the same
// arithmetic and the gradient is that of the energy the tensors report; and on the ring layout
// (the CSR rings of RingView, or the benchmark's strided redundant copies).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cloth/cloth_math.hpp"
#include "kernels/cloth/mesh.hpp"
#include "kernels/common/vec.hpp"  // load()

namespace apron::cloth {

// Vertex v's ring in the CSR arrays: entries [begin, end), closed unless v is on the boundary.
struct Ring {
  std::uint32_t begin, end;
  bool open;
  APRON_HD std::uint32_t size() const { return end - begin; }
  // The entry after k, without wrapping (loops run k = begin; k != end; k = after(k), so that a
  // ring laid out with a stride, bench/cloth_kernels.cpp's redundant copies, runs the same code).
  APRON_HD std::uint32_t after(std::uint32_t k) const { return k + 1; }
  // Entry after k (k in [begin, end)), wrapping around a closed ring.
  APRON_HD std::uint32_t next(std::uint32_t k) const { return k + 1 < end ? k + 1 : begin; }
  // Triangles of the ring: one per consecutive pair, plus the closing pair of a closed ring.
  APRON_HD std::uint32_t triangles() const { return open ? size() - 1 : size(); }
};

struct RingView {
  const std::uint32_t* offsets;
  const std::uint32_t* neighbours;
  const std::uint8_t* boundary;
  const double* spoke_weights;  // per ring entry k of v: 1 / |x_k - x_v|^2 at rest
  const double* rim_weights;    // 1 / |x_next(k) - x_k|^2 at rest (0 after an open ring's end)
  APRON_HD Ring ring(std::size_t v) const {
    return {load(offsets + v), load(offsets + v + 1), load(boundary + v) != 0};
  }
  APRON_HD std::uint32_t neighbour(std::uint32_t k) const { return load(neighbours + k); }
  APRON_HD double spoke_weight(std::uint32_t k) const { return load(spoke_weights + k); }
  APRON_HD double rim_weight(std::uint32_t k) const { return load(rim_weights + k); }
};

template <class T>
RingView ring_view(const DeviceMesh<T>& mesh) {
  return {raw(mesh.ring_offsets), raw(mesh.ring_neighbours), raw(mesh.boundary),
          raw(mesh.spoke_weights), raw(mesh.rim_weights)};
}

// Positions or normals read from an array.
template <class T>
struct FromArray {
  const Vector3<T>* p;
  APRON_HD Vector3<T> operator()(std::uint32_t i) const { return p[i]; }
};

// The unit normal at v from its ring's triangles, with Max's weights (1999) |e1|^-2 |e2|^-2 taken
// at rest: exact on a sphere, and on the irregular cylinder of the tests a curvature error 7x
// smaller than with area weights (which leave it O(1) there). Frozen at rest because Max's weights
// of the current edges grow without bound as an edge shortens: where the sheet crumples, the
// normal then follows its smallest triangles and its derivative with it, and the drape at 32x32
// cells blew up in 20 of 24 runs (bench/NOTES.md, "Drape stability"). With rest weights the sum is
// quadratic in the positions, and under bending, which keeps edge lengths, it is Max's normal.
// max_weighted_sum is the sum before normalisation, which the normals' adjoint needs
// (vertex_adjoint.hpp).
template <class Points, class Rings>
APRON_HD auto max_weighted_sum(const Points& x, const Rings& rings, std::uint32_t v) {
  using V = decltype(x(v));
  using S = decltype(V{}.x);
  const auto ring = rings.ring(v);
  const V xv = x(v);
  V sum{S(0), S(0), S(0)};
  std::uint32_t k = ring.begin;
  for (std::uint32_t n = 0; n < ring.triangles(); ++n, k = ring.next(k)) {
    const std::uint32_t next = ring.next(k);
    const V e1 = x(rings.neighbour(k)) - xv, e2 = x(rings.neighbour(next)) - xv;
    sum += S(rings.spoke_weight(k) * rings.spoke_weight(next)) * cross(e1, e2);
  }
  return sum;
}
template <class Points, class Rings>
APRON_HD auto vertex_normal(const Points& x, const Rings& rings, std::uint32_t v) {
  return normalized(max_weighted_sum(x, rings, v));
}

// v's vertex area: a third of its ring's triangle areas (the energy's integration weight).
template <class Points, class Rings>
APRON_HD auto vertex_area(const Points& x, const Rings& rings, std::uint32_t v) {
  using S = decltype(x(v).x);
  const auto ring = rings.ring(v);
  const auto xv = x(v);
  S twice_area = S(0);
  std::uint32_t k = ring.begin;
  for (std::uint32_t n = 0; n < ring.triangles(); ++n, k = ring.next(k))
    twice_area += norm(cross(x(rings.neighbour(k)) - xv, x(rings.neighbour(ring.next(k))) - xv));
  return twice_area / S(6);
}

// Normals recomputed from positions on demand (no normal array in between).
template <class Points>
struct RingNormals {
  Points x;
  RingView rings;
  APRON_HD auto operator()(std::uint32_t i) const { return vertex_normal(x, rings, i); }
};

// t: the reference edge v -> first neighbour, in the plane normal to n.
template <class Points, class Rings, class RingT, class S>
APRON_HD Vector3<S> frame_tangent(const Points& x, const Rings& rings, const RingT& ring,
                                  Vector3<S> xv, Vector3<S> n) {
  return normalized(tangential(x(rings.neighbour(ring.begin)) - xv, n));
}

// The least-squares fit of e_k = th1_k p_1 + th2_k p_2 over the ring (th the edge's material
// coordinates, fixed at rest): the deformation of the ring's edges as one linear map. Returns
// false when the material coordinates are collinear.
template <class Points, class Rings, class RingT, class S, class C>
APRON_HD bool fit_basis(const Points& x, const Rings& rings, const Vector2<C>* coordinates,
                        const RingT& ring, Vector3<S> xv, Vector3<S>& p1, Vector3<S>& p2) {
  C g11 = 0, g12 = 0, g22 = 0;
  Vector3<S> r1{S(0), S(0), S(0)}, r2{S(0), S(0), S(0)};
  for (std::uint32_t k = ring.begin; k != ring.end; k = ring.after(k)) {
    const Vector3<S> e = x(rings.neighbour(k)) - xv;
    const Vector2<C> th = coordinates[k];
    g11 += th.x * th.x;
    g12 += th.x * th.y;
    g22 += th.y * th.y;
    r1 += S(th.x) * e;
    r2 += S(th.y) * e;
  }
  const C det = g11 * g22 - g12 * g12;
  if (!(det > C(1e-6) * (g11 + g22) * (g11 + g22))) return false;
  p1 = S(quotient(g22, det)) * r1 - S(quotient(g12, det)) * r2;
  p2 = S(quotient(g11, det)) * r2 - S(quotient(g12, det)) * r1;
  return true;
}

// The surface basis a_1, a_2: the fitted p_1, p_2 each rotated into the plane normal to n (its
// length kept). Returns a_ab; false when the material coordinates are collinear.
template <class Points, class Rings, class RingT, class S, class C>
APRON_HD bool fit_metric(const Points& x, const Rings& rings, const Vector2<C>* coordinates,
                         const RingT& ring, Vector3<S> xv, Vector3<S> n, Sym2<S>& metric) {
  Vector3<S> a1, a2;
  if (!fit_basis(x, rings, coordinates, ring, xv, a1, a2)) return false;
  a1 = norm(a1) * normalized(tangential(a1, n));
  a2 = norm(a2) * normalized(tangential(a2, n));
  metric = {dot(a1, a1), dot(a1, a2), dot(a2, a2)};
  return true;
}

// Ring edge e's misfit against the fitted linear map: its squared length less the map's
// prediction, per squared material length, (|e|^2 - |th1 p_1 + th2 p_2|^2) / |th|^2. A ring
// mapped affinely has no misfit; a curved one has its (rotation-invariant) share at rest.
template <class S, class C>
APRON_HD S edge_misfit(Vector3<S> e, Vector2<C> th, Vector3<S> p1, Vector3<S> p2) {
  const Vector3<S> f = S(th.x) * p1 + S(th.y) * p2;
  // |e|^2 - |f|^2 as (e - f) . (e + f): no cancellation of the two squares.
  return quotient(dot(e - f, e + f), S(th.x * th.x + th.y * th.y));
}

// The hourglass measure of v: the mean over its ring of m_k^2, m_k = (misfit_k - rest_k) / 2,
// the edge strains that the fitted map does not explain. The fit alone is blind to a vertex
// moving against a symmetric ring (its material coordinates sum to zero), so on a regular grid
// an in-plane checkerboard or stripe pattern costs no stretch energy (an hourglass mode); this
// sees every ring edge's length. Zero where the fit fails (as the metric is then constant).
template <class Points, class Rings, class C>
APRON_HD auto ring_misfit(const Points& x, const Rings& rings, const Vector2<C>* coordinates,
                          const C* rest_misfit, std::uint32_t v) {
  using S = decltype(x(v).x);
  const auto ring = rings.ring(v);
  const Vector3<S> xv = x(v);
  Vector3<S> p1, p2;
  S sum = S(0);
  if (!fit_basis(x, rings, coordinates, ring, xv, p1, p2)) return sum;
  for (std::uint32_t k = ring.begin; k != ring.end; k = ring.after(k)) {
    const S m = S(0.5) * (edge_misfit(x(rings.neighbour(k)) - xv, coordinates[k], p1, p2) -
                          S(rest_misfit[k]));
    sum += m * m;
  }
  return quotient(sum, S(ring.size()));
}

// The four equations of one ring edge in fit_curvature's normal equations, as the rows
// (tk^2, tk bk, 0 | dnt tk), (0, bk tk, bk^2 | dnb bk), (tk bk, bk^2, 0 | dnt bk) and
// (0, tk^2, tk bk | dnb tk) of Sym3System::add_row, added in the same order but without the
// products with a zero coefficient (16 of add_row's 36 multiply-adds, which no compiler may drop:
// 0 x is NaN for an infinite x). For finite values the sums are add_row's to the bit: a product
// with a zero coefficient is a signed zero, and adding one leaves a sum unchanged unless that sum
// is -0, which a sum started at +0 never becomes (x + (-x) rounds to +0). m02 stays 0.
template <class S>
APRON_HD void add_curvature_rows(Sym3System<S>& fit, S tk, S bk, S dnt, S dnb) {
  const S tt = tk * tk, tb = tk * bk, bb = bk * bk;
  const S rt = dnt * tk, rb = dnb * bk, rtb = dnt * bk, rbt = dnb * tk;
  fit.m00 += tt * tt;  // rows 1 and 3
  fit.m00 += tb * tb;
  fit.m01 += tt * tb;  // rows 1 and 3
  fit.m01 += tb * bb;
  fit.m11 += tb * tb;  // rows 1 to 4
  fit.m11 += tb * tb;
  fit.m11 += bb * bb;
  fit.m11 += tt * tt;
  fit.m12 += tb * bb;  // rows 2 and 4
  fit.m12 += tt * tb;
  fit.m22 += bb * bb;  // rows 2 and 4
  fit.m22 += tb * tb;
  fit.r0 += tt * rt;  // rows 1 and 3
  fit.r0 += tb * rtb;
  fit.r1 += tb * rt;  // rows 1 to 4
  fit.r1 += tb * rb;
  fit.r1 += bb * rtb;
  fit.r1 += tt * rbt;
  fit.r2 += bb * rb;  // rows 2 and 4
  fit.r2 += tb * rbt;
}

// b_ab from the four equations per ring edge (Rusinkiewicz's dn.t = b11 t_k + b12 b_k,
// dn.b = b12 t_k + b22 b_k, each times t_k and b_k), solved by least squares. Edges are scaled by
// the reference edge's length so that the normal equations stay O(1) in float at any mesh size.
template <class Points, class Normals, class Rings, class RingT, class S>
APRON_HD bool fit_curvature(const Points& x, const Normals& normals, const Rings& rings,
                            const RingT& ring, Vector3<S> xv, Vector3<S> n, Vector3<S> t,
                            Vector3<S> b, Sym2<S>& curvature) {
  const S scale = S(1) / norm(x(rings.neighbour(ring.begin)) - xv);
  Sym3System<S> fit;
  for (std::uint32_t k = ring.begin; k != ring.end; k = ring.after(k)) {
    const std::uint32_t j = rings.neighbour(k);
    const Vector3<S> e = x(j) - xv, dn = normals(j) - n;
    const S tk = scale * dot(e, t), bk = scale * dot(e, b), dnt = dot(dn, t), dnb = dot(dn, b);
    add_curvature_rows(fit, tk, bk, dnt, dnb);
  }
  S u[3];
  if (!fit.solve(u)) return false;
  curvature = {scale * u[0], scale * u[1], scale * u[2]};
  return true;
}

// Frame tangent, metric and curvature at v (normal n given). Where a fit fails the metric is the
// identity and the curvature zero, and false is returned.
template <class Points, class Normals, class Rings, class S, class C>
APRON_HD bool vertex_tensors(const Points& x, const Normals& normals, const Rings& rings,
                             const Vector2<C>* coordinates, std::uint32_t v, Vector3<S> n,
                             Vector3<S>& t, Sym2<S>& metric, Sym2<S>& curvature) {
  const auto ring = rings.ring(v);
  const Vector3<S> xv = x(v);
  t = frame_tangent(x, rings, ring, xv, n);
  const Vector3<S> b = cross(n, t);
  metric = {S(1), S(0), S(1)};
  curvature = {S(0), S(0), S(0)};
  if (!fit_metric(x, rings, coordinates, ring, xv, n, metric)) return false;
  Sym2<S> c;
  if (!fit_curvature(x, normals, rings, ring, xv, n, t, b, c)) return false;
  curvature = c;
  return true;
}

}  // namespace apron::cloth
