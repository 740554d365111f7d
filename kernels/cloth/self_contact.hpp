// The sheet against itself: offset-geometry contact between non-adjacent primitives (a vertex
// and a triangle not holding it, two edges without a shared vertex), after Bridson, Fedkiw and
// Anderson 2002 (repulsion within a thickness) and Chen et al. 2025, "Offset Geometric Contact"
// (a per-vertex displacement bound instead of continuous collision detection).
//
// - Repulsion: every pair closer than the thickness t holds the energy k/2 (t - d)^2, d the
//   distance between its primitives. d is a minimum over the primitives' barycentric
//   coordinates, so its gradient with respect to the four vertices is w_k n at the minimiser
//   (n the unit vector between the closest points, w_k their weights): the force is exactly the
//   negative gradient of an energy, and adds none of its own.
// - The bound: in each step no vertex moves farther than gamma (min(t, d_v) - delta), gamma < 1/2,
//   d_v the distance of the nearest pair v is part of, delta < t the gap no pair may close
//   (0: none but zero). Take any non-adjacent pair at distance d >= delta at the start of a step.
//   If d < t every corner of both primitives has d_v <= d, so moves at most gamma (d - delta);
//   otherwise each moves at most gamma (t - delta) <= gamma (d - delta). A point of a primitive
//   is a fixed convex combination of its corners, so it moves at most as far as the farthest
//   corner; along the straight path of the step the pair's distance therefore stays at least
//   d - 2 gamma (d - delta) = delta + (1 - 2 gamma)(d - delta) >= delta. A sheet that starts with
//   its non-adjacent parts delta apart never comes closer than that, nor intersects, and no
//   continuous collision detection is needed. The clamp scales the step's displacement and
//   velocity of a vertex by the same factor below 1, so it only removes kinetic energy. The
//   repulsion does the work; the clamp is the guarantee when it is not enough (a fast impact).
// - The broad phase: a Verlet list. Every pair within R = t + skin is listed (a uniform grid of
//   the primitives' bounding boxes, built by one sort through the common cell list); the list
//   stays valid (holds every pair closer than t) until some vertex has moved skin / 2 since the
//   list was built.
//
// Determinism: the list is sorted by a key of the pair's primitives, and each vertex sums its
// pairs in that order; a listed pair farther than t adds exactly zero. So a vertex's force and
// bound do not depend on when the list was built or which rank built it: 1 and N ranks, and a
// restart, give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cloth/cloth_math.hpp"
#include "kernels/cloth/mesh.hpp"
#include "kernels/common/backend.hpp"
#include "kernels/common/cell_list.hpp"

namespace apron::cloth {

using Point = Vector3<double>;

// A vertex against a triangle (vertex[0]; vertex[1..3]) or an edge against an edge (vertex[0..1];
// vertex[2..3]), in the sheet's vertex numbering.
struct ContactPair {
  std::uint32_t vertex[4];
  std::uint32_t edge_edge;  // 0: vertex-triangle, 1: edge-edge
};

// The closest points of a pair: d = |sum_k weight[k] x_k|, normal the unit vector of that sum
// (zero when d is zero).
struct PairGeometry {
  double distance = 0;
  double weight[4] = {0, 0, 0, 0};
  Point normal{0, 0, 0};
};

APRON_HD inline double clamp01(double x) {
  return x < 0 ? 0 : (x > 1 ? 1 : x);
}

// Closest point of triangle (a, b, c) to p by Voronoi regions (Ericson, Real-Time Collision
// Detection, 5.1.5), as barycentric weights; relative to a, in float64.
APRON_HD inline PairGeometry point_triangle(Point p, Point a, Point b, Point c) {
  const Point ab = b - a, ac = c - a, ap = p - a;
  double wb = 0, wc = 0;  // the closest point is a + wb ab + wc ac
  const double d1 = dot(ab, ap), d2 = dot(ac, ap);
  const Point bp = ap - ab, cp = ap - ac;
  const double d3 = dot(ab, bp), d4 = dot(ac, bp), d5 = dot(ab, cp), d6 = dot(ac, cp);
  const double vc = d1 * d4 - d3 * d2, vb = d5 * d2 - d1 * d6, va = d3 * d6 - d5 * d4;
  if (d1 <= 0 && d2 <= 0) {
  } else if (d3 >= 0 && d4 <= d3) {
    wb = 1;
  } else if (vc <= 0 && d1 >= 0 && d3 <= 0) {
    wb = d1 / (d1 - d3);
  } else if (d6 >= 0 && d5 <= d6) {
    wc = 1;
  } else if (vb <= 0 && d2 >= 0 && d6 <= 0) {
    wc = d2 / (d2 - d6);
  } else if (va <= 0 && d4 - d3 >= 0 && d5 - d6 >= 0) {
    wc = (d4 - d3) / ((d4 - d3) + (d5 - d6));
    wb = 1 - wc;
  } else if (va + vb + vc > 0) {
    const double inverse = 1 / (va + vb + vc);
    wb = vb * inverse;
    wc = vc * inverse;
  } else {  // collinear corners: the nearest point of the three sides
    const Point bc = c - b;
    const double on_ab = dot(ab, ab) > 0 ? clamp01(d1 / dot(ab, ab)) : 0;
    const double on_ac = dot(ac, ac) > 0 ? clamp01(d2 / dot(ac, ac)) : 0;
    const double on_bc = dot(bc, bc) > 0 ? clamp01(dot(bp, bc) / dot(bc, bc)) : 0;
    const double to_ab = norm(ap - on_ab * ab), to_ac = norm(ap - on_ac * ac);
    const double to_bc = norm(ap - ((1 - on_bc) * ab + on_bc * ac));
    if (to_ab <= to_ac && to_ab <= to_bc) {
      wb = on_ab;
    } else if (to_ac <= to_bc) {
      wc = on_ac;
    } else {
      wb = 1 - on_bc, wc = on_bc;
    }
  }
  PairGeometry g;
  const Point offset = ap - (wb * ab + wc * ac);
  g.distance = norm(offset);
  g.weight[0] = 1, g.weight[1] = -(1 - wb - wc), g.weight[2] = -wb, g.weight[3] = -wc;
  g.normal = g.distance > 0 ? (1 / g.distance) * offset : Point{0, 0, 0};
  return g;
}

// Closest points of segments p0 + s (p1 - p0) and q0 + u (q1 - q0), s, u in [0, 1] (Ericson
// 5.1.9); parallel segments take s = 0. Relative to p0, in float64.
APRON_HD inline PairGeometry segment_segment(Point p0, Point p1, Point q0, Point q1) {
  const Point d1 = p1 - p0, d2 = q1 - q0, r = p0 - q0;
  const double a = dot(d1, d1), e = dot(d2, d2), f = dot(d2, r), c = dot(d1, r), b = dot(d1, d2);
  double s = 0, u = 0;
  if (a <= 0 && e <= 0) {
  } else if (a <= 0) {
    u = clamp01(f / e);
  } else if (e <= 0) {
    s = clamp01(-c / a);
  } else {
    const double denominator = a * e - b * b;  // >= 0; 0 for parallel segments
    s = denominator > 0 ? clamp01((b * f - c * e) / denominator) : 0;
    u = (b * s + f) / e;
    if (u < 0) {
      u = 0;
      s = clamp01(-c / a);
    } else if (u > 1) {
      u = 1;
      s = clamp01((b - c) / a);
    }
  }
  PairGeometry g;
  const Point offset = (r + s * d1) - u * d2;
  g.distance = norm(offset);
  g.weight[0] = 1 - s, g.weight[1] = s, g.weight[2] = -(1 - u), g.weight[3] = -u;
  g.normal = g.distance > 0 ? (1 / g.distance) * offset : Point{0, 0, 0};
  return g;
}

APRON_HD inline PairGeometry pair_geometry(const ContactPair& pair, const Point* x) {
  const Point a = x[pair.vertex[0]], b = x[pair.vertex[1]], c = x[pair.vertex[2]],
              d = x[pair.vertex[3]];
  return pair.edge_edge ? segment_segment(a, b, c, d) : point_triangle(a, b, c, d);
}

// The sheet's triangles and edges (each edge once), in its vertex numbering.
struct SheetPrimitives {
  DeviceVector<std::uint32_t> triangles;  // 3 per triangle
  DeviceVector<std::uint32_t> edges;      // 2 per edge, lower index first
  std::size_t vertices = 0;
};
SheetPrimitives sheet_primitives(const HostMesh& mesh);

struct SelfContactParams {
  double thickness = 0;  // t: pairs closer than this repel
  double skin = 0;       // the list holds pairs within t + skin
  double stiffness = 0;  // k [N/m] of k/2 (t - d)^2
  double bound = 0.4;    // gamma < 1/2 of the displacement bound
  double gap = 0;        // delta < t: no pair comes closer
};

// One rank's self-contact: the pairs that touch one of its vertices (`row_of`: the local row of
// each vertex of the sheet, or kNotHere), from the positions of the whole sheet.
// What evaluating one listed pair gives (a namespace-scope type: CUDA's kernels cannot take a
// class's private one).
struct SelfContactPairState {
  double distance;
  double weight[4];
  Point force;   // k (t - d) n: the pair's push on its first primitive
  Point normal;  // n, zero where the pair does not touch
  double energy;
};

class SelfContact {
 public:
  static constexpr std::uint32_t kNotHere = 0xffffffffu;

  void set_rows(const std::vector<std::uint32_t>& row_of, std::size_t rows);

  // The list from positions x (every vertex of the sheet), and x kept as the build positions.
  void build(const SheetPrimitives& sheet, const DeviceVector<Point>& x,
             const SelfContactParams& p);
  // Whether some vertex has moved farther than skin / 2 since the list was built (or none was).
  bool stale(const DeviceVector<Point>& x, const SelfContactParams& p) const;

  // Each pair's closest points at x, then per local row: gradient[row] += d(contact energy)/dx,
  // bound[row] = gamma (min(t, nearest pair's distance) - delta), at least 0.
  void forces(const DeviceVector<Point>& x, const SelfContactParams& p,
              DeviceVector<Point>& gradient, DeviceVector<double>& bound);
  // The product with the repulsion's Gauss-Newton Hessian k sum (dd/dx)(dd/dx)^T over the
  // touching pairs of the last forces() (positive semidefinite, unlike the whole Hessian, whose
  // part along the surface is -k (t - d) / d: an implicit step takes that part's negative
  // curvature as energy): per local row, out[row] += scale (H q)[row], q by vertex of the sheet.
  void add_product(const DeviceVector<Point>& q, const SelfContactParams& p, double scale,
                   DeviceVector<Point>& out);
  // Per local row, its share of the pairs' energies (a quarter of each pair's) at x.
  void energies(const DeviceVector<Point>& x, const SelfContactParams& p,
                DeviceVector<double>& energy);

  const DeviceVector<ContactPair>& pairs() const { return pairs_; }
  // The smallest distance of a listed pair (-1 when there is none) and that pair: the check at
  // rest.
  double closest(const DeviceVector<Point>& x, ContactPair& pair) const;
  std::size_t builds() const { return builds_; }
  std::size_t device_bytes() const;

 private:
  void bin(const DeviceVector<std::uint32_t>& items, int corners, const DeviceVector<Point>& x,
           const apron::GridSpec& grid, CellList& cells);
  apron::GridSpec grid_for(const DeviceVector<Point>& x, std::size_t edges, double radius) const;
  void list_pairs(const SheetPrimitives& sheet, const DeviceVector<Point>& x, double radius);
  void sort_pairs_by_key();
  void index_rows();
  void evaluate(const DeviceVector<Point>& x, const SelfContactParams& p);
  DeviceVector<double> pair_products_;  // k dd/dx . q of each pair, for add_product

  DeviceVector<std::uint32_t> row_of_;  // by vertex of the sheet
  std::size_t rows_ = 0;
  CellList triangle_cells_, edge_cells_;
  DeviceVector<std::uint32_t> counts_, order_;
  DeviceVector<std::uint64_t> keys_;  // of the pairs, for the sort
  DeviceVector<ContactPair> pairs_;
  DeviceVector<Point> built_at_;
  // Per (row, pair, corner) entry, sorted by row: pair * 4 + corner; the entries of local row r
  // are entries_[row_start_[r] .. row_start_[r + 1]).
  DeviceVector<std::uint32_t> entries_, entry_rows_, row_start_;
  DeviceVector<SelfContactPairState> state_;
  std::size_t builds_ = 0;
};

// Per local row r < rows: the displacement x[r] - start[id[r]] of the step and the velocity
// scaled by min(1, bound[r] / |displacement|). Returns the number of vertices clamped.
std::size_t clamp_displacements(DeviceVector<Point>& x, DeviceVector<Point>& v,
                                const DeviceVector<Point>& start,
                                const DeviceVector<std::uint32_t>& id,
                                const DeviceVector<double>& bound, std::size_t rows);

}  // namespace apron::cloth
