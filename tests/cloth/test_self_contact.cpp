// The cloth's self-contact kernels against a brute-force reference written here: every
// non-adjacent vertex-triangle and edge-edge pair of a folded, crumpled sheet, with distances by
// a different construction (projection onto the plane, else the nearest side; segments by their
// interior critical point, else the nearest end against the other segment). Then the force as
// the energy's gradient, one rank's rows against the whole sheet's, and the displacement bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <numbers>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "kernels/cloth/mesh.hpp"
#include "kernels/cloth/self_contact.hpp"
#include "kernels/common/algorithms.hpp"

namespace apron::cloth {
namespace {

using P = Vector3<double>;

// ---- the reference ----------------------------------------------------------------------------

double point_segment(P p, P a, P b) {
  const P ab = b - a;
  const double len2 = dot(ab, ab);
  const double s = len2 > 0 ? std::clamp(dot(p - a, ab) / len2, 0.0, 1.0) : 0.0;
  return norm(p - (a + s * ab));
}

double reference_point_triangle(P p, P a, P b, P c) {
  const P n = normalized(cross(b - a, c - a));
  const double height = dot(p - a, n);
  const P q = p - height * n;  // in the plane: inside when on the inner side of every edge
  const bool inside = dot(cross(b - a, q - a), n) >= 0 && dot(cross(c - b, q - b), n) >= 0 &&
                      dot(cross(a - c, q - c), n) >= 0;
  if (inside) return std::fabs(height);
  return std::min({point_segment(p, a, b), point_segment(p, b, c), point_segment(p, c, a)});
}

double reference_segment_segment(P p0, P p1, P q0, P q1) {
  double best = std::min({point_segment(p0, q0, q1), point_segment(p1, q0, q1),
                          point_segment(q0, p0, p1), point_segment(q1, p0, p1)});
  // The interior critical point of |p(s) - q(u)|^2, when it lies inside both segments.
  const P d1 = p1 - p0, d2 = q1 - q0, r = p0 - q0;
  const double a = dot(d1, d1), b = dot(d1, d2), e = dot(d2, d2);
  const double det = a * e - b * b;
  if (det > 1e-12 * a * e) {
    const double s = (b * dot(d2, r) - e * dot(d1, r)) / det;
    const double u = (a * dot(d2, r) - b * dot(d1, r)) / det;
    if (s > 0 && s < 1 && u > 0 && u < 1)
      best = std::min(best, norm((p0 + s * d1) - (q0 + u * d2)));
  }
  return best;
}

std::vector<std::array<std::uint32_t, 2>> edges_of(const HostMesh& mesh) {
  std::set<std::pair<std::uint32_t, std::uint32_t>> seen;
  for (const auto& t : mesh.triangles)
    for (int k = 0; k < 3; ++k) seen.insert(std::minmax(t[k], t[(k + 1) % 3]));
  std::vector<std::array<std::uint32_t, 2>> edges;
  for (const auto& [a, b] : seen) edges.push_back({a, b});
  return edges;
}

struct ReferencePair {
  std::array<std::uint32_t, 4> vertex;  // sorted within each primitive, for comparison
  double distance;
};
using PairKey = std::pair<bool, std::array<std::uint32_t, 4>>;

PairKey key_of(bool edge_edge, std::array<std::uint32_t, 4> v) {
  if (edge_edge) {
    std::sort(v.begin(), v.begin() + 2);
    std::sort(v.begin() + 2, v.end());
    if (v[2] < v[0]) std::swap(v[0], v[2]), std::swap(v[1], v[3]);
  } else {
    std::sort(v.begin() + 1, v.end());
  }
  return {edge_edge, v};
}

// Every non-adjacent pair within `radius`, by its sorted vertices.
std::map<PairKey, double> all_pairs(const HostMesh& mesh, const std::vector<P>& x, double radius) {
  std::map<PairKey, double> pairs;
  for (std::uint32_t v = 0; v < x.size(); ++v)
    for (const auto& t : mesh.triangles) {
      if (t[0] == v || t[1] == v || t[2] == v) continue;
      const double d = reference_point_triangle(x[v], x[t[0]], x[t[1]], x[t[2]]);
      if (d <= radius) pairs[key_of(false, {v, t[0], t[1], t[2]})] = d;
    }
  const auto edges = edges_of(mesh);
  for (std::size_t e = 0; e < edges.size(); ++e)
    for (std::size_t f = e + 1; f < edges.size(); ++f) {
      const auto [a, b] = edges[e];
      const auto [c, d] = edges[f];
      if (a == c || a == d || b == c || b == d) continue;
      const double distance = reference_segment_segment(x[a], x[b], x[c], x[d]);
      if (distance <= radius) pairs[key_of(true, {a, b, c, d})] = distance;
    }
  return pairs;
}

// ---- the sheet: folded over onto itself (radius `bend`), then crumpled --------------------------

constexpr double kThickness = 0.05;

HostMesh folded_sheet(double bend) {
  GridSpec spec;
  spec.size_x = 2, spec.size_y = 1, spec.nx = 24, spec.ny = 12;
  spec.perturbed = true, spec.jitter = 0.2, spec.seed = 3;
  HostMesh mesh = grid_mesh(spec);
  const double half_turn = std::numbers::pi * bend;
  for (auto& p : mesh.positions) {
    const double s = p[0] + 0.3, y = p[1];  // arc length from the fold's start
    double x = s, z = 0;
    if (s > 0 && s <= half_turn) {
      x = bend * std::sin(s / bend), z = bend - bend * std::cos(s / bend);
    } else if (s > half_turn) {
      x = -(s - half_turn), z = 2 * bend;
    }
    z += 0.02 * std::sin(5 * y) * std::cos(3 * x);  // the crumple
    p = {x, y, z};
  }
  return mesh;
}

std::vector<P> points(const HostMesh& mesh) {
  std::vector<P> x;
  for (const auto& p : mesh.positions) x.push_back({p[0], p[1], p[2]});
  return x;
}

std::vector<std::uint32_t> all_rows(std::size_t n) {
  std::vector<std::uint32_t> rows(n);
  for (std::uint32_t v = 0; v < n; ++v) rows[v] = v;
  return rows;
}

SelfContactParams params() {
  SelfContactParams p;
  p.thickness = kThickness;
  p.skin = kThickness;
  p.stiffness = 100;
  p.bound = 0.4;
  p.gap = 0.2 * kThickness;
  return p;
}

// ---- the tests ----------------------------------------------------------------------------------

TEST(ClothSelfContact, ListsTheBruteForcePairsWithTheirDistances) {
  const HostMesh mesh = folded_sheet(0.06);
  const std::vector<P> x = points(mesh);
  DeviceVector<P> positions;
  to_device(x, positions);
  const SheetPrimitives sheet = sheet_primitives(mesh);
  SelfContact contact;
  contact.set_rows(all_rows(x.size()), x.size());
  const SelfContactParams p = params();
  const double radius = p.thickness + p.skin;
  contact.build(sheet, positions, p);

  const std::map<PairKey, double> expected = all_pairs(mesh, x, radius);
  std::map<PairKey, double> listed;
  double worst = 0;
  for (const ContactPair& pair : to_host(contact.pairs())) {
    const PairKey key =
        key_of(pair.edge_edge, {pair.vertex[0], pair.vertex[1], pair.vertex[2], pair.vertex[3]});
    EXPECT_TRUE(listed.emplace(key, pair_geometry(pair, x.data()).distance).second)
        << "a pair listed twice";
  }
  std::size_t vertex_triangle = 0, edge_edge = 0, missing = 0, extra = 0;
  for (const auto& [key, distance] : expected) {
    (key.first ? edge_edge : vertex_triangle) += 1;
    const auto found = listed.find(key);
    if (found == listed.end()) {
      // Only a pair at the radius itself may be judged differently by the two constructions.
      missing += std::fabs(distance - radius) > 1e-12;
      continue;
    }
    worst = std::max(worst, std::fabs(found->second - distance));
  }
  for (const auto& [key, distance] : listed)
    extra += !expected.count(key) && std::fabs(distance - radius) > 1e-12;
  std::printf(
      "      %zu vertex-triangle and %zu edge-edge pairs within %.3g m; largest distance "
      "difference %.3g m\n",
      vertex_triangle, edge_edge, radius, worst);
  EXPECT_GT(vertex_triangle, 200u);  // the fold brings the layers within reach
  EXPECT_GT(edge_edge, 200u);
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(extra, 0u);
  EXPECT_LT(worst, 1e-13);
}

TEST(ClothSelfContact, BoundIsTheNearestPrimitiveDistance) {
  const HostMesh mesh = folded_sheet(0.03);
  const std::vector<P> x = points(mesh);
  DeviceVector<P> positions;
  to_device(x, positions);
  SelfContact contact;
  contact.set_rows(all_rows(x.size()), x.size());
  const SelfContactParams p = params();
  contact.build(sheet_primitives(mesh), positions, p);
  DeviceVector<P> gradient(x.size(), P{0, 0, 0});
  DeviceVector<double> bound;
  contact.forces(positions, p, gradient, bound);
  const std::vector<double> bounds = to_host(bound);

  std::vector<double> nearest(x.size(), p.thickness);
  for (const auto& [key, distance] : all_pairs(mesh, x, p.thickness))
    for (const std::uint32_t v : key.second) nearest[v] = std::min(nearest[v], distance);
  double worst = 0;
  std::size_t touching = 0;
  for (std::size_t v = 0; v < x.size(); ++v) {
    worst = std::max(worst, std::fabs(bounds[v] / p.bound + p.gap - std::max(nearest[v], p.gap)));
    touching += nearest[v] < p.thickness;
  }
  std::printf(
      "      %zu of %zu vertices within the thickness of a primitive; largest difference "
      "of the nearest distance %.3g m\n",
      touching, x.size(), worst);
  EXPECT_GT(touching, 100u);
  EXPECT_LT(worst, 1e-13);
}

// The force is the negative gradient of the energy the diagnostics sum: central differences.
TEST(ClothSelfContact, ForceIsTheEnergysGradient) {
  const HostMesh mesh = folded_sheet(0.03);
  std::vector<P> x = points(mesh);
  const SheetPrimitives sheet = sheet_primitives(mesh);
  SelfContact contact;
  contact.set_rows(all_rows(x.size()), x.size());
  const SelfContactParams p = params();
  DeviceVector<P> positions;
  to_device(x, positions);
  contact.build(sheet, positions, p);
  DeviceVector<P> gradient(x.size(), P{0, 0, 0});
  DeviceVector<double> bound, energy;
  contact.forces(positions, p, gradient, bound);
  const std::vector<P> g = to_host(gradient);
  const auto total = [&](const std::vector<P>& at) {
    to_device(at, positions);
    contact.energies(positions, p, energy);
    double sum = 0;
    for (const double e : to_host(energy)) sum += e;
    return sum;
  };
  EXPECT_GT(total(x), 0);
  double worst = 0, largest = 0;
  const double h = 1e-7;
  for (std::size_t v = 0; v < x.size(); v += 7)
    for (int d = 0; d < 3; ++d) {
      std::vector<P> plus = x, minus = x;
      (d == 0 ? plus[v].x : d == 1 ? plus[v].y : plus[v].z) += h;
      (d == 0 ? minus[v].x : d == 1 ? minus[v].y : minus[v].z) -= h;
      const double numeric = (total(plus) - total(minus)) / (2 * h);
      const double analytic = d == 0 ? g[v].x : d == 1 ? g[v].y : g[v].z;
      worst = std::max(worst, std::fabs(numeric - analytic));
      largest = std::max(largest, std::fabs(analytic));
    }
  std::printf("      largest |gradient| %.4g N, largest difference from central differences %.3g\n",
              largest, worst);
  EXPECT_GT(largest, 0.1);
  EXPECT_LT(worst, 1e-5 * largest);
}

// The implicit step's product with the repulsion's Gauss-Newton Hessian, k sum g (g . q) over the
// touching pairs with g = dd/dx by central differences of the reference distances here; and
// q . H q >= 0 for every q (the whole Hessian's part along the surface is negative).
TEST(ClothSelfContact, ProductIsTheGaussNewtonHessians) {
  const HostMesh mesh = folded_sheet(0.03);
  const std::vector<P> x = points(mesh);
  const SheetPrimitives sheet = sheet_primitives(mesh);
  SelfContact contact;
  contact.set_rows(all_rows(x.size()), x.size());
  const SelfContactParams p = params();
  DeviceVector<P> positions, gradient(x.size(), P{0, 0, 0});
  DeviceVector<double> bound;
  to_device(x, positions);
  contact.build(sheet, positions, p);
  contact.forces(positions, p, gradient, bound);
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<P> q(x.size());
  for (P& v : q) v = {u(rng), u(rng), u(rng)};
  DeviceVector<P> q_device, product(x.size(), P{0, 0, 0});
  to_device(q, q_device);
  const double scale = 0.5;
  contact.add_product(q_device, p, scale, product);
  const std::vector<P> got = to_host(product);

  const auto distance = [](const ContactPair& pair, const std::vector<P>& at) {
    const P a = at[pair.vertex[0]], b = at[pair.vertex[1]], c = at[pair.vertex[2]],
            d = at[pair.vertex[3]];
    return pair.edge_edge ? reference_segment_segment(a, b, c, d)
                          : reference_point_triangle(a, b, c, d);
  };
  std::vector<P> want(x.size(), P{0, 0, 0});
  int touching = 0;
  const double h = 1e-7;
  for (const ContactPair& pair : to_host(contact.pairs())) {
    if (distance(pair, x) >= kThickness) continue;
    ++touching;
    P g[4];
    double along = 0;
    for (int k = 0; k < 4; ++k) {
      for (int axis = 0; axis < 3; ++axis) {
        std::vector<P> plus = x, minus = x;
        double* up = axis == 0   ? &plus[pair.vertex[k]].x
                     : axis == 1 ? &plus[pair.vertex[k]].y
                                 : &plus[pair.vertex[k]].z;
        double* down = axis == 0   ? &minus[pair.vertex[k]].x
                       : axis == 1 ? &minus[pair.vertex[k]].y
                                   : &minus[pair.vertex[k]].z;
        *up += h;
        *down -= h;
        const double slope = (distance(pair, plus) - distance(pair, minus)) / (2 * h);
        (axis == 0 ? g[k].x : axis == 1 ? g[k].y : g[k].z) = slope;
      }
      along += dot(g[k], q[pair.vertex[k]]);
    }
    for (int k = 0; k < 4; ++k) want[pair.vertex[k]] += (scale * p.stiffness * along) * g[k];
  }
  double worst = 0, largest = 0, curvature = 0;
  for (std::size_t v = 0; v < x.size(); ++v) {
    worst = std::max(worst, norm(got[v] - want[v]));
    largest = std::max(largest, norm(want[v]));
    curvature += dot(q[v], got[v]);
  }
  std::printf("      %d touching pairs, largest |H q| %.4g, largest difference %.3g, q.Hq %.4g\n",
              touching, largest, worst, curvature);
  EXPECT_GT(touching, 10);
  EXPECT_LT(worst, 1e-5 * largest);
  EXPECT_GT(curvature, 0);
}

// One rank's rows (the vertices with x < -0.5) get the same bits as the whole sheet's.
TEST(ClothSelfContact, OneRanksRowsMatchTheWholeSheetBitForBit) {
  const HostMesh mesh = folded_sheet(0.03);
  const std::vector<P> x = points(mesh);
  DeviceVector<P> positions;
  to_device(x, positions);
  const SheetPrimitives sheet = sheet_primitives(mesh);
  const SelfContactParams p = params();
  SelfContact whole, part;
  whole.set_rows(all_rows(x.size()), x.size());
  std::vector<std::uint32_t> row_of(x.size(), SelfContact::kNotHere), mine;
  for (std::uint32_t v = 0; v < x.size(); ++v)
    if (x[v].x < -0.5) row_of[v] = static_cast<std::uint32_t>(mine.size()), mine.push_back(v);
  part.set_rows(row_of, mine.size());
  whole.build(sheet, positions, p);
  part.build(sheet, positions, p);
  EXPECT_LT(part.pairs().size(), whole.pairs().size());
  DeviceVector<P> g_whole(x.size(), P{0, 0, 0}), g_part(mine.size(), P{0, 0, 0});
  DeviceVector<double> b_whole, b_part;
  whole.forces(positions, p, g_whole, b_whole);
  part.forces(positions, p, g_part, b_part);
  const auto gw = to_host(g_whole), gp = to_host(g_part);
  const auto bw = to_host(b_whole), bp = to_host(b_part);
  std::size_t differ = 0, pushed = 0;
  for (std::size_t r = 0; r < mine.size(); ++r) {
    const P a = gw[mine[r]], b = gp[r];
    differ += a.x != b.x || a.y != b.y || a.z != b.z || bw[mine[r]] != bp[r];
    pushed += norm(b) > 0;
  }
  EXPECT_GT(pushed, 50u);
  EXPECT_EQ(differ, 0u);
}

// Any displacement clamped to the bounds keeps every non-adjacent pair the gap apart along the
// whole straight path of the step (checked at 21 points of it), however large the displacement
// asked: at least delta + (1 - 2 gamma)(d - delta) for a pair d apart (d capped at t).
TEST(ClothSelfContact, ClampedStepsNeverIntersect) {
  const HostMesh mesh = folded_sheet(0.02);
  const std::vector<P> start = points(mesh);
  DeviceVector<P> x0;
  to_device(start, x0);
  SelfContact contact;
  contact.set_rows(all_rows(start.size()), start.size());
  SelfContactParams p = params();
  p.bound = 0.45;
  contact.build(sheet_primitives(mesh), x0, p);
  DeviceVector<P> gradient(start.size(), P{0, 0, 0});
  DeviceVector<double> bound;
  contact.forces(x0, p, gradient, bound);

  std::mt19937_64 random(5);
  std::normal_distribution<double> normal(0, 0.05);
  std::vector<P> moved = start;
  // The two layers driven through each other (0.1 m each, twice the thickness), and shaken.
  for (P& q : moved)
    q += P{normal(random), normal(random), (q.z > 0.02 ? -0.1 : 0.1) + normal(random)};
  DeviceVector<P> x, v(start.size(), P{1, 0, 0});
  to_device(moved, x);
  std::vector<std::uint32_t> ids = all_rows(start.size());
  DeviceVector<std::uint32_t> id;
  to_device(ids, id);
  const std::size_t clamped = clamp_displacements(x, v, x0, id, bound, start.size());
  const std::vector<P> end = to_host(x);
  const std::vector<P> velocity = to_host(v);
  EXPECT_GT(clamped, start.size() / 2);
  for (std::size_t i = 0; i < start.size(); ++i) EXPECT_LE(norm(velocity[i]), 1.0);

  // Per pair: its distance d0 at the start (the thickness when farther) sets the least it may
  // come to, delta + (1 - 2 gamma)(d0 - delta).
  const std::map<PairKey, double> initial = all_pairs(mesh, start, p.thickness);
  const auto least = [&](const PairKey& key) {
    const auto found = initial.find(key);
    const double d0 = found == initial.end() ? p.thickness : found->second;
    return p.gap + (1 - 2 * p.bound) * (d0 - p.gap);
  };
  double closest = 1e300, tightest = 1e300;  // tightest: distance / its least, over the step
  for (int k = 0; k <= 20; ++k) {
    std::vector<P> at(start.size());
    for (std::size_t i = 0; i < start.size(); ++i)
      at[i] = start[i] + (k / 20.0) * (end[i] - start[i]);
    for (const auto& [key, distance] : all_pairs(mesh, at, p.thickness)) {
      closest = std::min(closest, distance);
      tightest = std::min(tightest, distance / least(key));
    }
  }
  std::printf(
      "      %zu of %zu vertices clamped; closest pair %.4g m along the step (the gap "
      "%.4g m); smallest distance / its guaranteed least %.4f\n",
      clamped, start.size(), closest, p.gap, tightest);
  EXPECT_GE(tightest, 1 - 1e-9);
  EXPECT_LT(tightest, 1.5);  // the layers were driven up to their bound
  EXPECT_GT(closest, p.gap);
}

}  // namespace
}  // namespace apron::cloth
