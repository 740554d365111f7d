// Small host-and-device math of the plane detector: Morton codes, the moments of a
// point set and the 3D-KHT coplanarity test (the eigen-decomposition is kernels/common's).
// Header-only so that the tests' sequential references use the very same arithmetic as the
// device kernels.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/hd.hpp"
#include "kernels/common/symmetric3.hpp"

namespace apron::planes {

inline constexpr double kPi = 3.14159265358979323846;

// ---- Morton codes ----------------------------------------------------------------------------

// Spreads the low 21 bits of v so that bit k lands on bit 3k.
APRON_HD inline std::uint64_t spread_bits(std::uint64_t v) {
  v &= 0x1fffffULL;
  v = (v | (v << 32)) & 0x1f00000000ffffULL;
  v = (v | (v << 16)) & 0x1f0000ff0000ffULL;
  v = (v | (v << 8)) & 0x100f00f00f00f00fULL;
  v = (v | (v << 4)) & 0x10c30c30c30c30c3ULL;
  v = (v | (v << 2)) & 0x1249249249249249ULL;
  return v;
}

// The octree cell of a point at `depth` (cells per axis 2^depth over the cube [origin,
// origin + size)^3): x in the lowest bit of each 3-bit group, so that the code's top 3l bits are
// the point's node at level l. Points on or beyond the cube's far faces go to the last cell.
APRON_HD inline std::uint64_t morton_code(double x, double y, double z, const double origin[3],
                                          double size, int depth) {
  const double cells = static_cast<double>(std::uint64_t{1} << depth);
  const double p[3] = {x, y, z};
  std::uint64_t code = 0;
  for (int d = 0; d < 3; ++d) {
    double q = std::floor((p[d] - origin[d]) / size * cells);
    q = q < 0 ? 0 : (q > cells - 1 ? cells - 1 : q);
    code |= spread_bits(static_cast<std::uint64_t>(q)) << d;
  }
  return code;
}

// ---- Moments and eigen-decomposition ---------------------------------------------------------

using apron::Eigen3;
using apron::eigen_symmetric;
using apron::Sym3;

// Sums over a point set, each point relative to a reference point r (the first point of the
// node): sum 1, sum (p - r), sum (p - r)(p - r)^T. Relative sums keep float64 exact enough for
// thin clusters far from the origin (the centred covariance then loses no digits to r).
struct Moments {
  double count = 0;
  double s[3] = {0, 0, 0};
  double ss[6] = {0, 0, 0, 0, 0, 0};  // xx xy xz yy yz zz
  // A trimming pass only: the sums of the squared and the fourth powers of the counted points'
  // distances off the pass's plane, for the slab test (slab_like).
  double d2 = 0, d4 = 0;

  APRON_HD void add(double dx, double dy, double dz) {
    count += 1;
    s[0] += dx, s[1] += dy, s[2] += dz;
    ss[0] += dx * dx, ss[1] += dx * dy, ss[2] += dx * dz;
    ss[3] += dy * dy, ss[4] += dy * dz, ss[5] += dz * dz;
  }
  // The sums of two point sets with the same reference point.
  APRON_HD void merge(const Moments& o) {
    count += o.count;
    for (int d = 0; d < 3; ++d) s[d] += o.s[d];
    for (int k = 0; k < 6; ++k) ss[k] += o.ss[k];
    d2 += o.d2, d4 += o.d4;
  }
  // The same sums relative to another reference point: delta = old reference - new one.
  APRON_HD Moments shifted(const double delta[3]) const {
    Moments m = *this;
    const int ij[6][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 1}, {1, 2}, {2, 2}};
    for (int k = 0; k < 6; ++k) {
      const int i = ij[k][0], j = ij[k][1];
      m.ss[k] += s[i] * delta[j] + delta[i] * s[j] + count * delta[i] * delta[j];
    }
    for (int d = 0; d < 3; ++d) m.s[d] += count * delta[d];
    return m;
  }
  APRON_HD void add_distance(double along) {
    const double a2 = along * along;
    d2 += a2, d4 += a2 * a2;
  }
  // Covariance (divided by count) and the mean relative to the reference.
  APRON_HD Sym3 covariance(double mean[3]) const {
    Sym3 c;
    for (int d = 0; d < 3; ++d) mean[d] = s[d] / count;
    const int ij[6][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 1}, {1, 2}, {2, 2}};
    for (int k = 0; k < 6; ++k) c.m[k] = ss[k] / count - mean[ij[k][0]] * mean[ij[k][1]];
    return c;
  }
};

// ---- The octree's node test ------------------------------------------------------------------

// 3D-KHT's parameters of the octree (Limberger & Oliveira 2015, section 3.1 and table 2).
struct OctreeParams {
  int max_depth = 10;  // deepest level (a level-l node has edge size / 2^l)
  // s_level: nodes above it are subdivided without a test. 2 rather than 1: a level-1 node (half
  // the cloud) that the data fills only in part can hold a slab of outliers that looks planar.
  int first_level = 2;
  int min_points = 30;    // s_ms: a node with fewer points is dropped
  double thickness = 25;  // s_alpha: coplanar needs lambda_mid > s_alpha * lambda_min
  double isotropy = 6;    // s_beta: and lambda_max < s_beta * lambda_mid
  // Robust fit before the test (3D-KHT's refitting step, moved before the test so that outliers
  // spread through the volume do not fail nodes on a plane): points farther than the node's edge
  // / trim_divisor from the node's plane leave its moments; then, trim_passes - 1 times, those
  // farther than three standard deviations of the remaining ones (sigma clipping); the node then
  // needs min_inlier_fraction of its points left. trim_passes = 0: the paper's plain test.
  double trim_divisor = 10;
  int trim_passes = 4;
  double min_inlier_fraction = 0.8;
  // The slab test: a node that passes the test above but only just (its middle
  // eigenvalue below slab_ratio times its smallest), holding at least slab_points inliers whose
  // distances off their plane have a kurtosis below slab_kurtosis, is not one plane but stacked
  // or staggered surfaces seen as one: the treads of an open staircase (their envelope at the
  // stairs' pitch), a floor and a low step, a slab of outliers cut by the scan's edge. Noise off
  // one plane is about Gaussian (kurtosis 3, about 2.8 once trimmed at three standard
  // deviations); a uniform slab has 1.8, two sheets 1 to 1.5. Such a node is subdivided, and its
  // children find the surfaces it holds. slab_kurtosis = 0 (or no trimming): the paper's test.
  double slab_kurtosis = 2.2;
  double slab_ratio = 400;
  int slab_points = 100;
  // Sibling halves: the test asks a node to be 17.3 noise deviations wide (lambda_mid = e^2 / 12
  // against s_alpha lambda_min), so a surface close to another (a shelf's board 0.15 m above the
  // floor) may have no node that holds it alone and is wide enough: the parent holds both, the
  // children are too small. So the four children on one side of a parent's midplane along an
  // axis (a half: twice a child's area) are also tested together, their trimmed sums added; a
  // half that passes is one cluster. false: nodes only (the paper's). Halves of nodes holding a
  // band of leftover outliers (beside a plane already found, or cut by the scan's edge) pass as
  // well, as slabs: a half also needs its smallest eigenvalue at most halves_noise times the
  // clusters' so far, and its points per area (of a uniform rectangle: 12 sqrt(lambda_mid
  // lambda_max)) at least halves_density times theirs (count-weighted means over every rank:
  // the scan's noise and sampling on its surfaces).
  bool sibling_halves = true;
  // And the children left after the halves, grouped by their planes (coplanar_children). Off
  // by default, as seed_octants: together they still cost the GPU about a fifth more at 20M
  // points (bench/NOTES.md).
  bool coplanar_children = false;
  double halves_noise = 2;
  double halves_density = 0.1;
  // Octant seeds: a node holding a face and its neighbour (a box's side and its top, or the
  // floor) has a plane of all its points that leans between the two, and trimming from it keeps
  // neither; so the first band is taken about whichever of the node's plane and its octants'
  // planes holds the most of its points (seed_plane). Only where that band is at most
  // seed_noise_bands noise deviations (of the clusters so far, which the halves keep): a wider
  // band about a tilted octant's plane holds a strip of the next face as well, and the node
  // passes with a tilted plane (the boxes scene's box top tilted 4.8 degrees at 9 deviations).
  bool seed_octants = false;
  double seed_noise_bands = 5;
};

// Of a node's plane (normal, mean: in and out, relative to the node's reference point) and the
// planes of its octants holding at least kSeedPoints points, the one with the most of the node's
// n points within `band` (the node's plane unless another holds more). point(k, p): the k-th
// point relative to the reference; octant(k): its octant. The octree builder computes the same
// choice from the same pieces (octant_plane, within_band) in passes over all nodes at once.
inline constexpr int kSeedPoints = 10;
inline constexpr int kSeedCandidates = 9;  // the node's plane, then its eight octants'

// An octant's plane (its sums m relative to the node's reference point) as a seed: false where
// it holds too few points.
APRON_HD inline bool octant_plane(const Moments& m, double normal[3], double mean[3]) {
  if (m.count < kSeedPoints) return false;
  const Eigen3 e = eigen_symmetric(m.covariance(mean));
  for (int d = 0; d < 3; ++d) normal[d] = e.vec[d][0];
  return true;
}

APRON_HD inline bool within_band(const double normal[3], const double mean[3], const double p[3],
                                 double band) {
  const double along =
      normal[0] * (p[0] - mean[0]) + normal[1] * (p[1] - mean[1]) + normal[2] * (p[2] - mean[2]);
  return along <= band && along >= -band;
}

template <class PointAt, class OctantAt>
APRON_HD inline void seed_plane(std::uint32_t n, const PointAt& point, const OctantAt& octant,
                                double band, double normal[3], double mean[3]) {
  Moments m[8];
  double p[3];
  for (std::uint32_t k = 0; k < n; ++k) {
    point(k, p);
    m[octant(k)].add(p[0], p[1], p[2]);
  }
  const auto holds = [&](const double* nn, const double* c) {
    std::uint32_t in = 0;
    for (std::uint32_t k = 0; k < n; ++k) {
      point(k, p);
      in += within_band(nn, c, p, band) ? 1u : 0u;
    }
    return in;
  };
  std::uint32_t most = holds(normal, mean);
  for (int o = 0; o < 8; ++o) {
    double nn[3], c[3];
    if (!octant_plane(m[o], nn, c)) continue;
    const std::uint32_t in = holds(nn, c);
    if (in <= most) continue;
    most = in;
    for (int d = 0; d < 3; ++d) normal[d] = nn[d], mean[d] = c[d];
  }
}

// Whether the nodes of a level whose first band is `band` take octant seeds, at the noise of
// the clusters so far (lmin_sum: their count-weighted lambda_min; count: their points).
APRON_HD inline bool seeds_octants(const OctreeParams& p, double band, double lmin_sum,
                                   double count) {
  return p.seed_octants && count > 0 &&
         band * band <= p.seed_noise_bands * p.seed_noise_bands * (lmin_sum / count);
}

// The slab test's verdict on a node's trimmed sums m (d2, d4 filled) and eigenvalues e.
APRON_HD inline bool slab_like(const OctreeParams& p, const Moments& m, const Eigen3& e) {
  if (p.slab_kurtosis <= 0 || m.count < p.slab_points || !(m.d2 > 0)) return false;
  const double lmin = e.value[0] < 0 ? 0 : e.value[0];
  if (e.value[1] >= p.slab_ratio * lmin) return false;  // far thinner than the test asks: a plane
  const double kurtosis = m.count * m.d4 / (m.d2 * m.d2);
  return kurtosis < p.slab_kurtosis;
}

enum NodeState : std::uint8_t { kSubdivide = 0, kCluster = 1, kDrop = 2 };

// What becomes of a node at `level` with `count` points and covariance eigenvalues e: a cluster
// (approximately coplanar: thin against its middle extent, not a line), subdivided, or dropped
// (too few points, or the deepest level without passing).
// With the trimmed sums m (null: no slab test) a node that passes but is slab_like is split.
APRON_HD inline NodeState classify_node(const OctreeParams& p, int level, double count,
                                        double inliers, const Eigen3& e,
                                        const Moments* m = nullptr) {
  if (count < p.min_points) return kDrop;
  if (level >= p.first_level && inliers >= p.min_points &&
      inliers >= p.min_inlier_fraction * count) {
    const double lmin = e.value[0] < 0 ? 0 : e.value[0], lmid = e.value[1], lmax = e.value[2];
    if (lmid > p.thickness * lmin && lmax < p.isotropy * lmid && !(m && slab_like(p, *m, e)))
      return kCluster;
  }
  return level >= p.max_depth ? kDrop : kSubdivide;
}

// ---- Sibling halves ---------------------------------------------------------------------------

// A group of a parent's children (octant k: bit k; octant bits x, y, z as in the Morton code)
// tested as one node: their trimmed sums relative to the reference point of octant `ref`.
struct SiblingGroup {
  unsigned members = 0;
  int ref = -1;
  Moments m;
  Eigen3 e;
};

// What a half may be at most (its smallest eigenvalue) and at least (its points per area), and
// the share of a plane's points that its children's trimming keeps: their first band (a child's
// edge / trim_divisor) may be narrower than the scan's noise (erf(band / (sigma sqrt 2)), sigma^2
// the clusters' mean lambda_min), so the node test's inlier fraction is asked of that share.
struct HalfLimits {
  double max_lmin = 0;
  double min_density = 0;
  double kept = 1;
};

// The sums of the octants in `members` relative to the first one's reference point (first),
// their points (all, trimmed or not) and how many children they are.
struct GroupSums {
  Moments m;
  double points = 0;
  int first = -1, children = 0;
};

APRON_HD inline GroupSums group_sums(const Moments* sums, const double (*ref)[3],
                                     const double* count, unsigned members) {
  GroupSums g;
  for (int o = 0; o < 8; ++o) {
    if (((members >> o) & 1u) == 0) continue;
    if (g.first < 0) g.first = o;
    const double delta[3] = {ref[o][0] - ref[g.first][0], ref[o][1] - ref[g.first][1],
                             ref[o][2] - ref[g.first][2]};
    g.m.merge(sums[o].shifted(delta));
    g.points += count[o];
    ++g.children;
  }
  return g;
}

// The children's trimmed sums (each relative to its own reference point ref[k]) and point counts
// of the octants in `members`, added and tested as one node at `level`; true: a cluster (g set).
APRON_HD inline bool test_group(const OctreeParams& p, int level, const Moments* sums,
                                const double (*ref)[3], const double* count, unsigned members,
                                const HalfLimits& limits, SiblingGroup& g) {
  const GroupSums sum = group_sums(sums, ref, count, members);
  Moments m = sum.m;
  const double points = sum.points;
  const int first = sum.first, children = sum.children;
  // The counts first: most halves fail them, before an eigen-decomposition.
  if (children < 2 || m.count < 3 || m.count < p.min_points ||
      m.count < p.min_inlier_fraction * points * limits.kept)
    return false;
  // The children's distances were each taken off its own plane and trimmed at three of its own
  // few points' deviations: their kurtosis reads low for any surface, so the slab test does not
  // apply (the noise limit refuses a stack of surfaces instead) and the group's cluster carries
  // no slab sums.
  m.d2 = m.d4 = 0;
  double mean[3];
  const Eigen3 e = eigen_symmetric(m.covariance(mean));
  const double area = 12 * std::sqrt(e.value[1] * e.value[2]);
  if (e.value[0] > limits.max_lmin || !(m.count >= limits.min_density * area) ||
      classify_node(p, level, points * limits.kept, m.count, e) != kCluster)
    return false;
  g.members = members, g.ref = first, g.m = m, g.e = e;
  return true;
}

// Whether a half of children of edge e (2e x 2e x e) can pass the thickness test at the scan's
// noise (lambda_min of its planes' clusters): no direction in it spreads its points more than
// (4 + 4 + 1) e^2 / 12, so below thickness * lambda_min none can, and the deep levels, whose
// halves are narrower than the noise allows, are not tested.
APRON_HD inline bool halves_can_pass(const OctreeParams& p, double e, double noise_lmin) {
  return 9 * e * e / 12 > p.thickness * noise_lmin;
}

// Of a parent's children that are not clusters (`eligible`: octant bits), the halves that pass
// the node test together and within the limits, on the axis whose passing halves hold the most
// inliers (one half or both: they do not overlap). Returns how many (0-2), in out.
APRON_HD inline int sibling_halves(const OctreeParams& p, int level, unsigned eligible,
                                   const Moments* sums, const double (*ref)[3], const double* count,
                                   const HalfLimits& limits, SiblingGroup out[2]) {
  int chosen = 0;
  double most = 0;
  for (int axis = 0; axis < 3; ++axis) {
    SiblingGroup g[2];
    int n = 0;
    double inliers = 0;
    for (int side = 0; side < 2; ++side) {
      unsigned members = 0;
      for (int o = 0; o < 8; ++o)
        if (((o >> axis) & 1) == side) members |= 1u << o;
      if (test_group(p, level, sums, ref, count, members & eligible, limits, g[n]))
        inliers += g[n++].m.count;
    }
    if (n > 0 && inliers > most) {
      most = inliers, chosen = n;
      for (int k = 0; k < n; ++k) out[k] = g[k];
    }
  }
  return chosen;
}

// Whether a symmetric matrix's smallest eigenvalue is at most t: C - t I is then not positive
// definite, i.e. (Sylvester's criterion) not all its leading principal minors are positive. A
// few products instead of an eigen-decomposition.
APRON_HD inline bool smallest_eigenvalue_at_most(const Sym3& c, double t) {
  const double a = c.m[0] - t, b = c.m[1], e = c.m[2], d = c.m[3] - t, f = c.m[4], g = c.m[5] - t;
  const double minor2 = a * d - b * b;
  const double det = a * (d * g - f * f) - b * (b * g - f * e) + e * (b * f - d * e);
  return !(a > 0 && minor2 > 0 && det > 0);
}

// Of the children in `eligible`, those whose trimmed planes are one plane, whatever their
// octants: a group grown from each child in turn, the others joining (most inliers first) while
// the group's smallest eigenvalue stays within the noise limit; the largest group that passes the
// halves' test is kept. It gathers what no axis half holds alone: a surface's pieces in children
// on a diagonal, or beside children holding another surface. True: a group passed (g set).
// The growth adds each child's sums shifted once to a common reference point, and a child
// already in a tested group seeds none (grown from it, its group is mostly that group again).
APRON_HD inline bool coplanar_children(const OctreeParams& p, int level, unsigned eligible,
                                       const Moments* sums, const double (*ref)[3],
                                       const double* count, const HalfLimits& limits,
                                       SiblingGroup& g) {
  int order[8];
  int n = 0;
  for (int o = 0; o < 8; ++o) {
    if (((eligible >> o) & 1u) == 0 || sums[o].count < 3) continue;
    int k = n++;
    for (; k > 0 && sums[order[k - 1]].count < sums[o].count; --k) order[k] = order[k - 1];
    order[k] = o;
  }
  if (n < 2) return false;
  Moments shifted[8];
  for (int k = 0; k < n; ++k) {
    const int o = order[k];
    const double delta[3] = {ref[o][0] - ref[order[0]][0], ref[o][1] - ref[order[0]][1],
                             ref[o][2] - ref[order[0]][2]};
    shifted[k] = sums[o].shifted(delta);
  }
  unsigned covered = 0;
  bool found = false;
  for (int seed = 0; seed < n; ++seed) {
    if ((covered >> order[seed]) & 1u) continue;
    unsigned members = 1u << order[seed];
    Moments grown = shifted[seed];
    for (int k = 0; k < n; ++k) {
      if (k == seed) continue;
      Moments trial = grown;
      trial.merge(shifted[k]);
      double mean[3];
      if (!smallest_eigenvalue_at_most(trial.covariance(mean), limits.max_lmin)) continue;
      members |= 1u << order[k];
      grown = trial;
    }
    if (members == (1u << order[seed])) continue;
    covered |= members;
    SiblingGroup trial;
    if (test_group(p, level, sums, ref, count, members, limits, trial) &&
        (!found || trial.m.count > g.m.count)) {
      g = trial;
      found = true;
    }
  }
  return found;
}

// The groups of a parent's eligible children that pass as one node: the halves, then (with
// coplanar_children) a group of the children they left. Returns how many (0-3), in out.
APRON_HD inline int sibling_groups(const OctreeParams& p, int level, unsigned eligible,
                                   const Moments* sums, const double (*ref)[3], const double* count,
                                   const HalfLimits& limits, SiblingGroup out[3]) {
  int groups = sibling_halves(p, level, eligible, sums, ref, count, limits, out);
  if (!p.coplanar_children) return groups;
  unsigned left = eligible;
  for (int k = 0; k < groups; ++k) left &= ~out[k].members;
  if (coplanar_children(p, level, left, sums, ref, count, limits, out[groups])) ++groups;
  return groups;
}

}  // namespace apron::planes
