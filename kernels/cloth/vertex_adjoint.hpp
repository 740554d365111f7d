// Reverse-mode (adjoint) derivatives of the per-vertex method of vertex_geometry.hpp, written by
// hand for the fast energy gradient (energy.cpp). Each function here re-runs the forward
// arithmetic of its counterpart there (same operations, same branches) and then propagates a
// given output adjoint back to the positions and normals it read. The forward-mode gradient
// (energy_gradient_forward, dual.hpp) is the test oracle for all of it.
//
// Slots: results are written per vertex of v's closed 1-ring, in an array laid out like the ring
// CSR with one extra slot in front: slot 0 is v itself, slot 1 + (k - ring.begin) is ring entry k.
#pragma once

#include <cstdint>

#include "kernels/cloth/cloth_math.hpp"
#include "kernels/cloth/vertex_geometry.hpp"

namespace apron::cloth {

// y = normalized(x): x_bar = (y_bar - (y_bar . y) y) / |x|; zero where x = 0 (normalized() is the
// constant zero there).
template <class T>
APRON_HD inline Vector3<T> normalized_adjoint(Vector3<T> x, Vector3<T> y_bar) {
  const T length = norm(x);
  if (!(length > T(0))) return {T(0), T(0), T(0)};
  const T inverse = T(1) / length;
  const Vector3<T> y = inverse * x;
  return inverse * (y_bar - dot(y_bar, y) * y);
}

// y = tangential(a, n) = a - (a . n) n: adds the adjoints of a and n.
template <class T>
APRON_HD inline void tangential_adjoint(Vector3<T> a, Vector3<T> n, Vector3<T> y_bar,
                                        Vector3<T>& a_bar, Vector3<T>& n_bar) {
  const T yn = dot(y_bar, n), an = dot(a, n);
  a_bar += y_bar - yn * n;
  n_bar += T(-1) * (yn * a + an * y_bar);
}

// The adjoint of the vertex normals (vertex_normal), pulled to the positions per vertex j.
// n_k = normalized(sum_k) with sum_k the sum over k's ring triangles of w c, w the triangle's
// rest weight at k and c = e1 x e2; s_k is the adjoint of sum_k. Every triangle (j, a, b) of j's
// ring adds to sum_j, sum_a and sum_b (as the pairs (b, j) of a's ring and (j, a) of b's, the
// mesh being consistently oriented), with the same c = u x v, u = a - j, v = b - j, d = b - a;
// its weights there are w_j = W(u) W(v), w_a = W(d) W(u), w_b = W(v) W(d) (W = 1 / rest length^2,
// the ring's spoke and rim weights), and c's dependence on x_j gives the three corners' adjoints
// with respect to x_j together as (w_j s_j + w_a s_a + w_b s_b) x d. Pulling (each vertex sums
// its own terms) instead of pushing into its neighbours' slots keeps the sums race-free and in a
// fixed order without atomics.
template <class T>
APRON_HD Vector3<T> vertex_normals_adjoint_at(const Vector3<T>* x, const Vector3<T>* sum_bar,
                                              const RingView& rings, std::uint32_t j) {
  const Ring ring = rings.ring(j);
  const Vector3<T> sj = sum_bar[j];
  Vector3<T> g{T(0), T(0), T(0)};
  if (ring.triangles() == 0) return g;
  // Corner b of one triangle is corner a of the next: its values are carried, not read again.
  std::uint32_t k = ring.begin;
  Vector3<T> xa = x[rings.neighbour(k)], sa = sum_bar[rings.neighbour(k)];
  T wu = T(rings.spoke_weight(k));
  for (std::uint32_t n = 0; n < ring.triangles(); ++n) {
    const std::uint32_t next = ring.next(k), b = rings.neighbour(next);
    const Vector3<T> xb = x[b], sb = sum_bar[b];
    const T wv = T(rings.spoke_weight(next)), wd = T(rings.rim_weight(k));
    g += cross((wu * wv) * sj + (wd * wu) * sa + (wv * wd) * sb, xb - xa);
    k = next;
    xa = xb;
    sa = sb;
    wu = wv;
  }
  return g;
}

// The hourglass control's share of the loss at v: weight x ring_misfit's sum over v's ring (its
// mean times the ring's size), from each ring entry's rest misfit; weight 0: none.
template <class T>
struct Misfit {
  const T* rest;
  T weight;
};

// mu_k = weight m_k / |th_k|^2 of ring edge e: d(weight m_k^2) / de_k = 2 mu_k e_k, and with
// respect to the fitted map's prediction f_k, -2 mu_k f_k.
template <class T, class C>
APRON_HD T misfit_adjoint(Vector3<T> e, Vector2<C> th, Vector3<T> p1, Vector3<T> p2,
                          const Misfit<T>& misfit, std::uint32_t k) {
  const T m = T(0.5) * (edge_misfit(e, th, p1, p2) - misfit.rest[k]);
  return quotient(misfit.weight * m, T(th.x * th.x + th.y * th.y));
}

// The adjoint of vertex_tensors at v with the normals as inputs (array `normal`). The forward
// pass computes the metric a_ab and the curvature b_ab as vertex_tensors does; then
// seed(metric, curvature, metric_bar, curvature_bar) gives their adjoints (per stored component,
// the 12 component counted once), and the reverse pass SETS x_slots to dL/dx_i and n_slots to
// dL/dn_i for every vertex i of v's closed ring. Where the metric fit fails (a and b constant)
// all slots are zero and seed is not called; where only the curvature fit fails, b = 0 is
// constant and only the metric's dependence remains, as in vertex_tensors. The hourglass
// control's terms (`misfit`) are added to the loss.
//
// Precision: the forward pass (the tensors, hence the strains and the seed) runs in T = float64:
// the strains are small differences of O(1) tensors, so float32 would leave force noise at rest
// (the test MixedPrecisionHasNoSpuriousForceAtRest). The reverse pass only needs relative
// accuracy and runs in R from edges and normal differences formed in T; R = float (the
// simulation's "mixed" precision) cuts the registers of this, the gradient's heaviest kernel,
// and halves the slots' bytes. R = T runs exactly the arithmetic of vertex_tensors (the tests'
// float64 path).
template <class R, class T, class Seed>
APRON_HD void vertex_tensors_adjoint(const Vector3<T>* x, const Vector3<T>* normal,
                                     const RingView& rings, const Vector2<T>* coordinates,
                                     std::uint32_t v, const Seed& seed, const Misfit<T>& misfit,
                                     Vector3<R>* x_slots, Vector3<R>* n_slots) {
  const Ring ring = rings.ring(v);
  const Vector3<T> xv = x[v], nv = normal[v];
  const Vector3<R> n = vector_cast<R>(nv), zero{R(0), R(0), R(0)};
  // Forward: fit_metric, in T.
  T g11 = 0, g12 = 0, g22 = 0;
  Vector3<T> r1{T(0), T(0), T(0)}, r2 = r1;
  for (std::uint32_t k = ring.begin; k < ring.end; ++k) {
    const Vector3<T> e = x[rings.neighbour(k)] - xv;
    const Vector2<T> th = coordinates[k];
    g11 += th.x * th.x;
    g12 += th.x * th.y;
    g22 += th.y * th.y;
    r1 += th.x * e;
    r2 += th.y * e;
  }
  const T det = g11 * g22 - g12 * g12;
  if (!(det > T(1e-6) * (g11 + g22) * (g11 + g22))) {
    for (std::uint32_t s = 0; s <= ring.size(); ++s) x_slots[s] = n_slots[s] = zero;
    return;
  }
  const Vector3<T> p1 = quotient(g22, det) * r1 - quotient(g12, det) * r2;
  const Vector3<T> p2 = quotient(g11, det) * r2 - quotient(g12, det) * r1;
  // Forward: frame_tangent, the frame, fit_curvature, and in the same pass over the ring the
  // hourglass control's misfits (each neighbour read once for both). The misfits' reverse pass
  // needs S = sum_k mu_k th_k th_k^T, and each mu_k again in the last loop: parked in the n slot
  // that loop then overwrites (one float read back, instead of the float64 misfit recomputed:
  // 1.036e9 against 9.9e8 vertex-steps/s at 1M on one H100, bench/NOTES.md). So is each edge e_k
  // in R, in its x slot: the last loop reads the same value back instead of gathering x_k again
  // and converting the difference (0.5% faster at 1M on one H200; the normal differences parked
  // as well spilled more than they saved: bench/NOTES.md). The metric's own values (the basis
  // rotated into the tangent plane) are formed after this loop, where they are used: fewer float64
  // values live across it (bench/NOTES.md).
  Vector3<T> t, b;
  T scale;
  {
    const Vector3<T> e0 = x[rings.neighbour(ring.begin)] - xv;
    t = normalized(tangential(e0, nv));
    b = cross(nv, t);
    scale = T(1) / norm(e0);
  }
  T s11 = 0, s12 = 0, s22 = 0;
  Sym3System<T> fit;
  for (std::uint32_t k = ring.begin; k < ring.end; ++k) {
    const std::uint32_t j = rings.neighbour(k), entry = k - ring.begin;
    const Vector3<T> e = x[j] - xv, dn = normal[j] - nv;
    x_slots[1 + entry] = vector_cast<R>(e);
    if (misfit.weight != T(0)) {
      const Vector2<T> th = coordinates[k];
      const T mu = misfit_adjoint(e, th, p1, p2, misfit, k);
      s11 += mu * th.x * th.x;
      s12 += mu * th.x * th.y;
      s22 += mu * th.y * th.y;
      n_slots[1 + entry].x = R(mu);
    }
    const T tk = scale * dot(e, t), bk = scale * dot(e, b), dnt = dot(dn, t), dnb = dot(dn, b);
    add_curvature_rows(fit, tk, bk, dnt, dnb);
  }
  T u64[3] = {T(0), T(0), T(0)};  // stays zero where the fit fails
  const bool curved = fit.solve(u64);
  const Sym2<T> curvature =
      curved ? Sym2<T>{scale * u64[0], scale * u64[1], scale * u64[2]} : Sym2<T>{T(0), T(0), T(0)};
  const Vector3<T> q1 = tangential(p1, nv), q2 = tangential(p2, nv);
  const Vector3<T> h1 = normalized(q1), h2 = normalized(q2);
  const T l1 = norm(p1), l2 = norm(p2);
  const Vector3<T> a1 = l1 * h1, a2 = l2 * h2;
  const Sym2<T> metric{dot(a1, a1), dot(a1, a2), dot(a2, a2)};

  Sym2<T> metric_seed, curvature_seed;
  seed(metric, curvature, metric_seed, curvature_seed);
  const Sym2<R> metric_bar = sym2_cast<R>(metric_seed),
                curvature_bar = sym2_cast<R>(curvature_seed);

  // Reverse: the hourglass control. Edge k's own adjoint 2 mu_k e_k is added in the last loop;
  // the fitted map's, -2 sum_k mu_k th_a,k f_k, is -2 (S_a1 p_1 + S_a2 p_2).
  // Reverse: the metric, a_ab = a_a . a_b with a_a = |p_a| normalized(tangential(p_a, n)).
  Vector3<R> n_bar = zero;
  Vector3<R> p1_bar = vector_cast<R>(T(-2) * (s11 * p1 + s12 * p2));
  Vector3<R> p2_bar = vector_cast<R>(T(-2) * (s12 * p1 + s22 * p2));
  {
    const Vector3<R> a1r = vector_cast<R>(a1), a2r = vector_cast<R>(a2);
    const Vector3<R> p1r = vector_cast<R>(p1), p2r = vector_cast<R>(p2);
    const R l1r = R(l1), l2r = R(l2);
    const Vector3<R> a1_bar = (R(2) * metric_bar.xx) * a1r + metric_bar.xy * a2r;
    const Vector3<R> a2_bar = metric_bar.xy * a1r + (R(2) * metric_bar.yy) * a2r;
    tangential_adjoint(p1r, n, normalized_adjoint(vector_cast<R>(q1), l1r * a1_bar), p1_bar, n_bar);
    tangential_adjoint(p2r, n, normalized_adjoint(vector_cast<R>(q2), l2r * a2_bar), p2_bar, n_bar);
    if (l1r > R(0)) p1_bar += quotient(dot(a1_bar, vector_cast<R>(h1)), l1r) * p1r;
    if (l2r > R(0)) p2_bar += quotient(dot(a2_bar, vector_cast<R>(h2)), l2r) * p2r;
  }
  const R c11 = R(quotient(g22, det)), c12 = R(quotient(g12, det)), c22 = R(quotient(g11, det));
  const Vector3<R> r1_bar = c11 * p1_bar - c12 * p2_bar;
  const Vector3<R> r2_bar = c22 * p2_bar - c12 * p1_bar;

  // Reverse: the curvature, b_ab = scale u with u = M^-1 r; w = M^-1 u_bar is r's adjoint and
  // -w u^T is M's (each off-diagonal stored once: both halves).
  const Vector3<R> tr = vector_cast<R>(t), br = vector_cast<R>(b);
  const R scale_r = R(scale), u[3] = {R(u64[0]), R(u64[1]), R(u64[2])};
  R w[3] = {R(0), R(0), R(0)}, scale_bar = R(0);
  if (curved) {
    const Sym3System<R> back{R(fit.m00),
                             R(fit.m01),
                             R(fit.m02),
                             R(fit.m11),
                             R(fit.m12),
                             R(fit.m22),
                             scale_r * curvature_bar.xx,
                             scale_r * curvature_bar.xy,
                             scale_r * curvature_bar.yy};
    back.solve(w);  // the same M: it solves
    scale_bar = curvature_bar.xx * u[0] + curvature_bar.xy * u[1] + curvature_bar.yy * u[2];
  }
  const R m00_bar = -w[0] * u[0], m11_bar = -w[1] * u[1], m22_bar = -w[2] * u[2];
  const R m01_m12_bar = -(w[0] * u[1] + w[1] * u[0]) - (w[1] * u[2] + w[2] * u[1]);
  // Per ring edge, with s = tk^2 + bk^2, the four rows add (tk^2 s, tk bk s, 0, s^2, tk bk s,
  // bk^2 s) to M (m00 m01 m02 m11 m12 m22) and (dnt tk, dnt bk + dnb tk, dnb bk) s to r.
  Vector3<R> t_bar = zero, b_bar = zero, xv_bar = zero;
  for (std::uint32_t k = ring.begin; k < ring.end; ++k) {
    const std::uint32_t entry = k - ring.begin, slot = 1 + entry;
    const Vector2<T> th = coordinates[k];
    const Vector3<R> e = x_slots[slot];
    Vector3<R> e_bar = R(th.x) * r1_bar + R(th.y) * r2_bar;
    if (misfit.weight != T(0)) e_bar += (R(2) * n_slots[slot].x) * e;
    Vector3<R> nj_bar = zero;
    if (curved) {
      const Vector3<R> dn = vector_cast<R>(normal[rings.neighbour(k)] - nv);
      const R et = dot(e, tr), eb = dot(e, br);
      const R tk = scale_r * et, bk = scale_r * eb, dnt = dot(dn, tr), dnb = dot(dn, br);
      const R s = tk * tk + bk * bk;
      const R q = m00_bar * tk * tk + m01_m12_bar * tk * bk + m22_bar * bk * bk + w[0] * dnt * tk +
                  w[1] * (dnt * bk + dnb * tk) + w[2] * dnb * bk;
      const R dq_dtk = R(2) * m00_bar * tk + m01_m12_bar * bk + w[0] * dnt + w[1] * dnb;
      const R dq_dbk = m01_m12_bar * tk + R(2) * m22_bar * bk + w[1] * dnt + w[2] * dnb;
      const R common = R(2) * (q + R(2) * m11_bar * s);
      const R tk_bar = tk * common + s * dq_dtk, bk_bar = bk * common + s * dq_dbk;
      const R dnt_bar = s * (w[0] * tk + w[1] * bk), dnb_bar = s * (w[1] * tk + w[2] * bk);
      e_bar += scale_r * (tk_bar * tr + bk_bar * br);
      t_bar += (scale_r * tk_bar) * e + dnt_bar * dn;
      b_bar += (scale_r * bk_bar) * e + dnb_bar * dn;
      scale_bar += tk_bar * et + bk_bar * eb;
      nj_bar = dnt_bar * tr + dnb_bar * br;
    }
    x_slots[slot] = e_bar;
    n_slots[slot] = nj_bar;
    xv_bar += R(-1) * e_bar;
    n_bar += R(-1) * nj_bar;
  }
  // Reverse: scale = 1 / |e0|, b = n x t, t = normalized(tangential(e0, n)). (b_ab does not
  // depend on the scale, M going as scale^4 and r as scale^3, so scale_bar vanishes up to
  // round-off: kept for the derivative of the arithmetic as written, but no test can see it.)
  if (curved) {
    const Vector3<T> e0 = x[rings.neighbour(ring.begin)] - xv;  // as in the forward pass
    const Vector3<R> e0r = vector_cast<R>(e0);
    Vector3<R> e0_bar = (-scale_bar * scale_r * scale_r * scale_r) * e0r;
    n_bar += cross(tr, b_bar);
    t_bar += cross(b_bar, n);
    tangential_adjoint(e0r, n, normalized_adjoint(vector_cast<R>(tangential(e0, nv)), t_bar),
                       e0_bar, n_bar);
    x_slots[1] += e0_bar;
    xv_bar += R(-1) * e0_bar;
  }
  x_slots[0] = xv_bar;
  n_slots[0] = n_bar;
}

}  // namespace apron::cloth
