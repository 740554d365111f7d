// Plane detection (issue 16): each stage against a simple sequential reference, the synthetic
// scenes against their ground truth, and the same planes on any rank count. Runs under mpirun
// with 1 to 4 ranks; the single-rank tests run on MPI_COMM_SELF of rank 0's twin on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include <unistd.h>

#include "config/case_config.hpp"
#include "kernels/common/algorithms.hpp"
#include "kernels/common/count_scan.hpp"
#include "kernels/planes/accumulator.hpp"
#include "kernels/planes/octree.hpp"
#include "planes/detector.hpp"
#include "planes/planes_workload.hpp"
#include "planes/split_cost.hpp"
#include "runtime/runtime.hpp"

namespace apron::planes {
namespace {

template <class T>
std::vector<T> host(const DeviceVector<T>& v) {
  std::vector<T> out(v.size());
  apron::copy(v.begin(), v.end(), out.begin());
  return out;
}

// Two builds' clusters and labels, bit for bit; returns the clusters' count.
std::size_t expect_same_clusters(const OctreeBuilder& a, const OctreeBuilder& b) {
  const auto x = host(a.clusters), y = host(b.clusters);
  EXPECT_EQ(x.size(), y.size());
  for (std::size_t c = 0; c < std::min(x.size(), y.size()); ++c)
    EXPECT_EQ(std::memcmp(&x[c], &y[c], sizeof(Cluster)), 0) << "cluster " << c;
  EXPECT_EQ(host(a.sorted_cluster), host(b.sorted_cluster));
  return x.size();
}

// This process alone (MPI_COMM_SELF), on its own device: the node-local rank stays the world's,
// so that DeviceInfo::select keeps this rank's GPU. With local rank 0, rank 1 of two on two GPUs
// moved to GPU 0 while its cached scratch memory stayed on GPU 1, and its one-rank run never
// finished (suspected cause of the Ranks tests' hang there). RankInfo::world() is collective:
// read once, at the first call, which every rank makes at the same point (the tests run in the
// same order everywhere).
RankInfo self_ranks() {
  static const RankInfo world = RankInfo::world();
  RankInfo r = world;
  r.comm = MPI_COMM_SELF;
  r.rank = 0;
  r.size = 1;
  return r;
}

std::filesystem::path scratch_dir_of(long pid) {
  return std::filesystem::temp_directory_path() / ("apron_test_planes_" + std::to_string(pid));
}

// Removes this process's scratch directory when the tests have ended (after MPI_Finalize, so
// no other rank still uses it).
struct RemoveOwnScratchDir {
  ~RemoveOwnScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(scratch_dir_of(static_cast<long>(::getpid())), ignored);
  }
};

// A scratch directory of this test job, shared by the ranks of `comm` only: ctest runs the
// np1/np2/np3 and stage jobs in parallel, and each rank runs the single-rank tests on its own.
// Named after the pid of the comm's first rank, whose process removes it at exit.
std::filesystem::path scratch_dir(MPI_Comm comm) {
  static const RemoveOwnScratchDir remove_at_exit;
  long pid = static_cast<long>(::getpid());
  MPI_Bcast(&pid, 1, MPI_LONG, 0, comm);
  const auto dir = scratch_dir_of(pid);
  std::filesystem::create_directories(dir);
  return dir;
}

// A whole run of the workload on `ranks` with the given case lines (after "workload: planes").
struct Run {
  PhaseTimers timers;
  std::unique_ptr<PlaneDetection> workload;
};
std::unique_ptr<Run> run_case(const std::string& planes_yaml, RankInfo ranks,
                              const std::vector<std::string>& sets = {}) {
  auto run = std::make_unique<Run>();
  const auto dir = scratch_dir(ranks.comm) / "output";
  const std::string text = "workload: planes\nname: t\nplanes:\n" + planes_yaml +
                           "output: {dir: " + dir.string() + "}\n";
  const config::CaseConfig c = config::parse_case_text("case.yaml", text, sets);
  run->workload = std::make_unique<PlaneDetection>(
      WorkloadContext{c, ranks, DeviceInfo::select(ranks), run->timers});
  run->workload->setup();
  run->workload->advance();
  return run;
}

// ---- small math ------------------------------------------------------------------------------

TEST(PlaneMath, JacobiEigenResidualWithinRoundOff) {
  std::mt19937 rng(3);
  std::normal_distribution<double> g(0, 1);
  for (int t = 0; t < 2000; ++t) {
    double a[3][3], m[3][3] = {};
    for (auto& row : a)
      for (double& x : row) x = g(rng);
    const double scale[3] = {1, 1e-3, 1e-7};  // thin clusters: one tiny eigenvalue
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 3; ++k) m[i][j] += a[i][k] * a[j][k] * scale[k];
    Sym3 s;
    s.m[0] = m[0][0], s.m[1] = m[0][1], s.m[2] = m[0][2], s.m[3] = m[1][1], s.m[4] = m[1][2],
    s.m[5] = m[2][2];
    const Eigen3 e = eigen_symmetric(s);
    EXPECT_LE(e.value[0], e.value[1]);
    EXPECT_LE(e.value[1], e.value[2]);
    for (int k = 0; k < 3; ++k) {
      double residual = 0;
      for (int i = 0; i < 3; ++i) {
        double av = 0;
        for (int j = 0; j < 3; ++j) av += m[i][j] * e.vec[j][k];
        residual = std::max(residual, std::fabs(av - e.value[k] * e.vec[i][k]));
      }
      EXPECT_LE(residual, 1e-13 * e.value[2]) << "matrix " << t << " eigenpair " << k;
    }
  }
}

TEST(PlaneMath, MortonPrefixIsTheNodeAtEachLevel) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  const double origin[3] = {-1, -1, -1};
  for (int t = 0; t < 1000; ++t) {
    const double p[3] = {u(rng), u(rng), u(rng)};
    const std::uint64_t code = morton_code(p[0], p[1], p[2], origin, 2.0, 10);
    for (int level = 1; level <= 10; ++level) {
      const std::uint64_t prefix = code >> (3 * (10 - level));
      for (int d = 0; d < 3; ++d) {
        const auto cell = static_cast<std::uint64_t>(std::floor((p[d] + 1) / 2 * (1 << level)));
        std::uint64_t bits = 0;
        for (int b = 0; b < level; ++b) bits |= ((prefix >> (3 * b + d)) & 1) << b;
        EXPECT_EQ(bits, cell);
      }
    }
  }
}

// ---- octree: level by level vs a recursive reference ------------------------------------------

// The reference: the same node test on each node's points, one level after another (the halves
// need the noise of every cluster found so far), with the sibling halves.
struct ReferenceOctree {
  const std::vector<Vec4>& sorted;  // in Morton order
  const std::vector<std::uint64_t>& keys;
  OctreeParams params;
  OctreeFrame frame;
  std::vector<std::tuple<int, std::uint64_t, std::uint32_t>> clusters;  // level, node, count
  std::vector<std::int64_t> point_node;  // per sorted position: its cluster's node key + level*2^58
  double noise[3] = {0, 0, 0};           // count * lambda_min, count * points per area, count
  double level_noise[3] = {0, 0, 0};     // the same before the level under test
  std::size_t groups = 0;                // clusters of sibling halves
  mutable std::size_t seeded = 0;        // nodes whose first fit an octant's plane replaced

  struct Node {
    std::vector<std::uint32_t> pts;
    Moments m;
    std::vector<char> in;
    Eigen3 e{};
    NodeState st = kSubdivide;
    double ref[3] = {0, 0, 0};
    std::int64_t owner = -1;  // the cluster its inliers join (node key + level * 2^58)
  };

  Moments moments(const std::vector<std::uint32_t>& pts, const std::vector<char>* in,
                  const double ref[3]) const {
    Moments m;
    for (std::size_t k = 0; k < pts.size(); ++k) {
      if (in && !(*in)[k]) continue;
      const Vec4 p = sorted[pts[k]];
      m.add(static_cast<double>(p.x) - ref[0], static_cast<double>(p.y) - ref[1],
            static_cast<double>(p.z) - ref[2]);
    }
    return m;
  }

  double first_band(int level) const {
    return frame.size / static_cast<double>(std::uint64_t{1} << level) / params.trim_divisor;
  }
  bool trims(int level) const {
    return params.trim_passes > 0 && params.trim_divisor > 0 && level >= params.first_level;
  }
  std::uint64_t key(int level, const Node& n) const {
    return keys[n.pts[0]] >> (3 * (params.max_depth - level));
  }

  // The octant seed of a node's first fit (OctreeBuilder's SeedFits).
  void seed(int level, const Node& node, double band, double n[3], double mean[3]) const {
    const int shift = 3 * (params.max_depth - level);
    if (!params.sibling_halves || shift < 3 ||
        !seeds_octants(params, band, level_noise[0], level_noise[2]) ||
        node.pts.size() < static_cast<std::size_t>(params.min_points))
      return;
    const auto point = [&](std::uint32_t k, double p[3]) {
      const Vec4 q = sorted[node.pts[k]];
      p[0] = static_cast<double>(q.x) - node.ref[0];
      p[1] = static_cast<double>(q.y) - node.ref[1];
      p[2] = static_cast<double>(q.z) - node.ref[2];
    };
    const auto octant = [&](std::uint32_t k) {
      return static_cast<int>((keys[node.pts[k]] >> (shift - 3)) & 7u);
    };
    const double before[3] = {n[0], n[1], n[2]};
    seed_plane(static_cast<std::uint32_t>(node.pts.size()), point, octant, band, n, mean);
    seeded += before[0] != n[0] || before[1] != n[1] || before[2] != n[2];
  }

  void test(int level, Node& node) const {
    const Vec4 r = sorted[node.pts[0]];
    node.ref[0] = r.x, node.ref[1] = r.y, node.ref[2] = r.z;
    node.m = moments(node.pts, nullptr, node.ref);
    node.in.assign(node.pts.size(), 1);
    if (trims(level)) {
      for (int pass = 0; pass < params.trim_passes; ++pass) {
        double mean[3], n[3], band = first_band(level);
        if (node.m.count < 3) {
          n[0] = 1, n[1] = n[2] = 0, mean[0] = mean[1] = mean[2] = 1e300, band = 0;
        } else {
          const Eigen3 e = eigen_symmetric(node.m.covariance(mean));
          for (int d = 0; d < 3; ++d) n[d] = e.vec[d][0];
          const double spread = 3 * std::sqrt(std::max(0.0, e.value[0]));
          if (pass > 0 && spread < band) band = spread;
          if (pass == 0) seed(level, node, band, n, mean);
        }
        Moments distances;  // the slab test's sums of the last pass
        for (std::size_t k = 0; k < node.pts.size(); ++k) {
          const Vec4 p = sorted[node.pts[k]];
          const double d[3] = {static_cast<double>(p.x) - node.ref[0],
                               static_cast<double>(p.y) - node.ref[1],
                               static_cast<double>(p.z) - node.ref[2]};
          const double along =
              n[0] * (d[0] - mean[0]) + n[1] * (d[1] - mean[1]) + n[2] * (d[2] - mean[2]);
          node.in[k] = along <= band && along >= -band;
          if (node.in[k]) distances.add_distance(along);
        }
        node.m = moments(node.pts, &node.in, node.ref);
        node.m.d2 = distances.d2, node.m.d4 = distances.d4;
      }
    }
    double mean[3];
    if (node.m.count >= 3) node.e = eigen_symmetric(node.m.covariance(mean));
    node.st = classify_node(params, level, static_cast<double>(node.pts.size()), node.m.count,
                            node.e, &node.m);
  }

  // The children of one parent (consecutive in `level_nodes` [a, b)) tested by halves.
  void halves(int level, std::vector<Node>& level_nodes, std::size_t a, std::size_t b) {
    if (!(noise[2] > 0)) return;
    Moments m[8];
    double ref[8][3] = {}, count[8] = {};
    std::size_t node_of[8] = {};
    unsigned eligible = 0;
    for (std::size_t s = a; s < b; ++s) {
      const int o = static_cast<int>(key(level, level_nodes[s]) & 7u);
      node_of[o] = s;
      if (level_nodes[s].st == kCluster) continue;
      eligible |= 1u << o;
      m[o] = level_nodes[s].m;
      for (int d = 0; d < 3; ++d) ref[o][d] = level_nodes[s].ref[d];
      count[o] = static_cast<double>(level_nodes[s].pts.size());
    }
    const double lmin = noise[0] / noise[2];
    if (!halves_can_pass(params, first_band(level) * params.trim_divisor, lmin)) return;
    const HalfLimits limits{params.halves_noise * lmin, params.halves_density * noise[1] / noise[2],
                            std::erf(first_band(level) / std::sqrt(2 * lmin))};
    SiblingGroup g[3];
    const int found = sibling_groups(params, level, eligible, m, ref, count, limits, g);
    groups += static_cast<std::size_t>(found);
    for (int k = 0; k < found; ++k) {
      const Node& leader = level_nodes[node_of[g[k].ref]];
      const std::uint64_t leader_key = key(level, leader);
      clusters.emplace_back(level, leader_key, static_cast<std::uint32_t>(g[k].m.count));
      for (int o = 0; o < 8; ++o) {
        if (((g[k].members >> o) & 1u) == 0) continue;
        level_nodes[node_of[o]].st = kCluster;
        level_nodes[node_of[o]].owner =
            static_cast<std::int64_t>(leader_key) + (std::int64_t{level} << 58);
      }
    }
  }

  // Level by level from the root's points: test, add the clusters' noise, halves per parent,
  // then each node's points that stay go to the next level's nodes.
  void build(const std::vector<std::uint32_t>& all) {
    std::vector<std::vector<std::uint32_t>> lists{all};
    for (int level = 1; level <= params.max_depth && !lists.empty(); ++level) {
      const int shift = 3 * (params.max_depth - level);
      std::vector<Node> level_nodes;
      for (const auto& list : lists)  // runs of equal prefix (the points stay in Morton order)
        for (std::size_t a = 0; a < list.size();) {
          std::size_t b = a;
          while (b < list.size() && (keys[list[b]] >> shift) == (keys[list[a]] >> shift)) ++b;
          level_nodes.emplace_back();
          level_nodes.back().pts.assign(list.begin() + a, list.begin() + b);
          a = b;
        }
      // Nodes of one prefix from several lists (a cluster's trimmed points and a split
      // sibling's) are one node: merge them, in Morton order.
      std::stable_sort(level_nodes.begin(), level_nodes.end(),
                       [&](const Node& x, const Node& y) { return x.pts[0] < y.pts[0]; });
      std::vector<Node> merged;
      for (Node& n : level_nodes) {
        if (!merged.empty() && key(level, merged.back()) == key(level, n)) {
          merged.back().pts.insert(merged.back().pts.end(), n.pts.begin(), n.pts.end());
          std::sort(merged.back().pts.begin(), merged.back().pts.end());
        } else {
          merged.push_back(std::move(n));
        }
      }
      level_nodes.swap(merged);
      std::copy(noise, noise + 3, level_noise);
      for (Node& n : level_nodes) {
        if (level < params.first_level) {
          n.st = n.pts.size() >= static_cast<std::size_t>(params.min_points) ? kSubdivide : kDrop;
          continue;
        }
        test(level, n);
        if (n.st != kCluster) continue;
        n.owner = static_cast<std::int64_t>(key(level, n)) + (std::int64_t{level} << 58);
        clusters.emplace_back(level, key(level, n), static_cast<std::uint32_t>(n.m.count));
        if (params.sibling_halves && trims(level)) {
          const double count = n.m.count, area = 12 * std::sqrt(n.e.value[1] * n.e.value[2]);
          noise[0] += count * std::max(0.0, n.e.value[0]);
          noise[1] += area > 0 ? count * count / area : 0;
          noise[2] += count;
        }
      }
      if (params.sibling_halves && trims(level) && level > params.first_level)
        for (std::size_t a = 0; a < level_nodes.size();) {
          std::size_t b = a;
          while (b < level_nodes.size() &&
                 key(level - 1, level_nodes[b]) == key(level - 1, level_nodes[a]))
            ++b;
          halves(level, level_nodes, a, b);
          a = b;
        }
      lists.clear();
      for (const Node& n : level_nodes) {
        if (n.st == kDrop) continue;
        std::vector<std::uint32_t> rest;
        for (std::size_t k = 0; k < n.pts.size(); ++k) {
          if (n.st == kCluster && (!trims(level) || n.in[k]))
            point_node[n.pts[k]] = n.owner;
          else if (n.st == kSubdivide || level < params.max_depth)
            rest.push_back(n.pts[k]);
        }
        if (!rest.empty()) lists.push_back(std::move(rest));
      }
    }
  }
};

std::vector<Vec4> scene_points(const std::string& kind, std::uint64_t n, double outliers,
                               std::vector<std::int32_t>* truth = nullptr) {
  SceneSpec spec;
  spec.kind = kind;
  spec.points = n;
  spec.noise = 0.001;
  spec.outliers = outliers;
  const Scene scene = make_scene(kind);
  std::vector<Vec4> points(n);
  if (truth) truth->resize(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    int plane = -1;
    const auto p = scene.point(spec, i, plane);
    // centred on the scene's box centre, as the workload does
    points[i] = {static_cast<float>(p[0] - (scene.lo[0] + scene.hi[0]) / 2),
                 static_cast<float>(p[1] - (scene.lo[1] + scene.hi[1]) / 2),
                 static_cast<float>(p[2] - (scene.lo[2] + scene.hi[2]) / 2), 0.f};
    if (truth) (*truth)[i] = plane;
  }
  return points;
}

// The centred cloud's half extent (largest |coordinate|) and largest distance from the centre.
struct CloudBounds {
  double half = 0, rho = 0;
  explicit CloudBounds(const std::vector<Vec4>& points) {
    for (const Vec4& p : points) {
      half =
          std::max({half, std::fabs(double(p.x)), std::fabs(double(p.y)), std::fabs(double(p.z))});
      rho = std::max(rho, std::sqrt(double(p.x) * p.x + double(p.y) * p.y + double(p.z) * p.z));
    }
  }
};

// The octree's cube centred at the origin, just holding every point.
OctreeFrame centred_frame(const std::vector<Vec4>& points) {
  OctreeFrame frame;
  frame.size = 2 * CloudBounds(points).half * 1.000001;
  for (double& o : frame.origin) o = -frame.size / 2;
  return frame;
}

// The tiled node sums (NodeMoments) against each node's points added one by one, with and
// without a trimming fit, for tiles from one point to whole nodes: nodes of 1 to 5000 points,
// the active points a subset of the sorted ones.
TEST(Octree, TiledNodeMomentsEqualDirectSums) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> coord(-3, 3);
  const std::size_t n = 40000;
  std::vector<Vec4> sorted(n);
  for (Vec4& p : sorted) p = {coord(rng), coord(rng), 0.05f * coord(rng), 0.f};
  std::vector<std::uint32_t> active;
  for (std::uint32_t i = 0; i < n; ++i)
    if (rng() % 5 != 0) active.push_back(i);
  const std::size_t m = active.size();
  std::vector<std::uint32_t> starts = {0};
  for (const std::uint32_t size : {1u, 2u, 31u, 32u, 33u, 511u, 512u, 513u, 1025u, 5000u})
    starts.push_back(starts.back() + size);
  while (starts.back() < m)
    starts.push_back(
        std::min<std::uint32_t>(starts.back() + 1 + rng() % 700, static_cast<std::uint32_t>(m)));
  const std::size_t nodes = starts.size() - 1;
  // A fit per node: a tilted plane through the node's first point's neighbourhood, band 0.1.
  std::vector<double> fit(7 * nodes);
  for (std::size_t s = 0; s < nodes; ++s) {
    const double n3[3] = {0.1, -0.05, 1.0};
    const double len = std::sqrt(n3[0] * n3[0] + n3[1] * n3[1] + n3[2] * n3[2]);
    for (int d = 0; d < 3; ++d) fit[7 * s + d] = n3[d] / len;
    fit[7 * s + 3] = 0.2, fit[7 * s + 4] = -0.1, fit[7 * s + 5] = 0.0, fit[7 * s + 6] = 0.1;
  }
  // The reference, in double, point by point.
  std::vector<Moments> plain(nodes), trimmed(nodes);
  std::vector<std::uint8_t> inlier(m);
  for (std::size_t s = 0; s < nodes; ++s) {
    const Vec4 r = sorted[active[starts[s]]];
    const double* f = &fit[7 * s];
    for (std::uint32_t i = starts[s]; i < starts[s + 1]; ++i) {
      const Vec4 p = sorted[active[i]];
      const double d[3] = {double(p.x) - r.x, double(p.y) - r.y, double(p.z) - r.z};
      plain[s].add(d[0], d[1], d[2]);
      const double along = f[0] * (d[0] - f[3]) + f[1] * (d[1] - f[4]) + f[2] * (d[2] - f[5]);
      inlier[i] = along <= f[6] && along >= -f[6];
      if (inlier[i]) trimmed[s].add(d[0], d[1], d[2]);
    }
  }
  const DeviceVector<Vec4> d_sorted(sorted.begin(), sorted.end());
  const DeviceVector<std::uint32_t> d_active(active.begin(), active.end());
  const DeviceVector<std::uint32_t> d_starts(starts.begin(), starts.end());
  const DeviceVector<double> d_fit(fit.begin(), fit.end());
  auto near = [](double a, double b, double scale) {
    return std::fabs(a - b) <= 1e-12 * scale + 1e-300;
  };
  // Each tile size, the nodes' totals by a warp per node and by a thread per node, each group of
  // lanes per tile (GPU), and the small level's tiles (this level counts as small for
  // small_level = m; the default is the production setting).
  struct Case {
    std::uint32_t tile;
    std::size_t warp_node_limit;
    std::uint32_t lanes;
    std::size_t small_level = 0;
  };
  const std::size_t limit = NodeMoments::kWarpNodeLimit;
  for (const Case c :
       {Case{1, limit, 0}, Case{7, limit, 0}, Case{32, limit, 0}, Case{512, limit, 0},
        Case{NodeMoments::default_tile_points(), limit, 0,
             NodeMoments::default_small_level_points()},
        Case{512, 0, 0}, Case{512, limit, 4}, Case{512, limit, 8}, Case{33, limit, 16},
        Case{512, limit, 32}, Case{512, limit, 0, m}, Case{64, limit, 0, m}}) {
    const std::uint32_t tile =
        m <= c.small_level ? std::min(c.tile, NodeMoments::kSmallLevelTilePoints) : c.tile;
    SCOPED_TRACE("tiles of " + std::to_string(tile) + " points, thread-per-node above " +
                 std::to_string(c.warp_node_limit) + " nodes, " + std::to_string(c.lanes) +
                 " lanes per tile");
    NodeMoments moments(c.tile, c.warp_node_limit, c.lanes, c.small_level);
    moments.plan(d_starts, nodes, m);
    ASSERT_EQ(moments.tile_points(), tile);
    DeviceVector<Moments> d_sums;
    DeviceVector<std::uint8_t> d_inlier(m, 2);
    for (const bool trim : {false, true}) {
      moments.reduce(d_sorted, d_active, d_starts, trim ? raw(d_fit) : nullptr,
                     trim ? raw(d_inlier) : nullptr, d_sums, {});
      const auto sums = host(d_sums);
      const auto& expected = trim ? trimmed : plain;
      std::size_t wrong = 0;
      for (std::size_t s = 0; s < nodes; ++s) {
        const Moments &a = sums[s], &b = expected[s];
        const double scale = 36 * std::max(1.0, b.count);
        bool ok = a.count == b.count;
        for (int d = 0; d < 3; ++d) ok = ok && near(a.s[d], b.s[d], scale);
        for (int k = 0; k < 6; ++k) ok = ok && near(a.ss[k], b.ss[k], scale);
        wrong += !ok;
      }
      EXPECT_EQ(wrong, 0u) << "tile " << tile << (trim ? " trimmed" : " plain");
      // The first node of 2 points: both tiles' partials in it.
      EXPECT_EQ(sums[1].count, trim ? trimmed[1].count : 2.0);
    }
    EXPECT_EQ(host(d_inlier), inlier) << "tile " << tile;
  }
}

// The nodes' totals by groups of lanes (NodeMoments::GroupedTotals) add in the order of a warp per
// node: the same sums, inliers and next fits, bit for bit, for nodes of one tile to hundreds (a
// warp's nodes of more tiles than its groups' lanes are summed by the whole warp).
TEST(Octree, GroupedTotalsEqualWarpTotals) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> coord(-2, 2);
  std::vector<std::uint32_t> starts = {0};
  for (int s = 0; s < 2001; ++s)
    starts.push_back(starts.back() + (s % 97 == 0 ? 300 + rng() % 3000 : 1 + rng() % 60));
  const std::size_t m = starts.back(), nodes = starts.size() - 1;
  std::vector<Vec4> sorted(m);
  for (Vec4& p : sorted) p = {coord(rng), coord(rng), 0.02f * coord(rng), 0.f};
  std::vector<std::uint32_t> active(m);
  std::iota(active.begin(), active.end(), 0u);
  std::vector<double> fit(7 * nodes);
  for (std::size_t s = 0; s < nodes; ++s) {
    const double plane[7] = {0.0, 0.1, std::sqrt(0.99), 0.1, 0.0, 0.0, 0.01 + 0.002 * (s % 7)};
    std::copy(plane, plane + 7, fit.begin() + static_cast<std::ptrdiff_t>(7 * s));
  }
  const DeviceVector<Vec4> d_sorted(sorted.begin(), sorted.end());
  const DeviceVector<std::uint32_t> d_active(active.begin(), active.end());
  const DeviceVector<std::uint32_t> d_starts(starts.begin(), starts.end());
  const DeviceVector<double> d_fit(fit.begin(), fit.end());
  using Grouped = NodeMoments::GroupedTotals;
  for (const std::uint32_t tile : {7u, 32u, 128u}) {
    SCOPED_TRACE("tiles of " + std::to_string(tile) + " points");
    std::vector<Moments> plain[2], trimmed[2];
    std::vector<double> next[2];
    std::vector<std::uint8_t> inlier[2];
    for (const Grouped grouped : {Grouped::never, Grouped::always}) {
      const int k = grouped == Grouped::always ? 1 : 0;
      NodeMoments moments(tile, NodeMoments::kWarpNodeLimit, 0, 0, grouped);
      moments.plan(d_starts, nodes, m);
      DeviceVector<Moments> d_sums;
      DeviceVector<std::uint8_t> d_inlier(m, 2);
      DeviceVector<double> d_next(7 * nodes, 0.0);
      moments.reduce(d_sorted, d_active, d_starts, nullptr, nullptr, d_sums, {});
      plain[k] = host(d_sums);
      moments.reduce(d_sorted, d_active, d_starts, raw(d_fit), raw(d_inlier), d_sums,
                     {raw(d_next), 0.02, true});
      trimmed[k] = host(d_sums);
      next[k] = host(d_next);
      inlier[k] = host(d_inlier);
    }
    ASSERT_EQ(plain[0].size(), nodes);
    ASSERT_EQ(trimmed[1].size(), nodes);
    EXPECT_EQ(std::memcmp(plain[0].data(), plain[1].data(), nodes * sizeof(Moments)), 0);
    EXPECT_EQ(std::memcmp(trimmed[0].data(), trimmed[1].data(), nodes * sizeof(Moments)), 0);
    EXPECT_EQ(std::memcmp(next[0].data(), next[1].data(), next[0].size() * sizeof(double)), 0);
    EXPECT_EQ(inlier[0], inlier[1]);
    double counted = 0;
    for (const Moments& t : trimmed[1]) counted += t.count;
    EXPECT_GT(counted, 0.0);  // the band holds points: the trimmed sums are not all zeros
  }
  // The production choice: grouped where the nodes hold few tiles on average.
  NodeMoments few(128, NodeMoments::kWarpNodeLimit, 0, 0);
  few.plan(d_starts, nodes, m);
  EXPECT_TRUE(few.grouped_totals());
  NodeMoments many(7, NodeMoments::kWarpNodeLimit, 0, 0);
  many.plan(d_starts, nodes, m);
  EXPECT_FALSE(many.grouped_totals());
}

// A count per index from a hash of it (0..9), plus what out[i] held: the scans' functors may
// read their own output (in-place scans).
struct HashedCount {
  const std::uint32_t* out;
  APRON_HD std::uint32_t operator()(std::size_t i) const {
    const auto h = static_cast<std::uint32_t>(i * 2654435761u) >> 7;
    return h % 10u + out[i];
  }
};

// The count scans (one launch on the GPU up to kCountScanOneLaunch values, the general scans
// beyond) equal the sums in order, exactly, at the sizes around the threshold, in place.
TEST(Octree, CountScansEqualSequentialSums) {
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{1023},
                              std::size_t{1025}, std::size_t{5000}, kCountScanOneLaunch - 1,
                              kCountScanOneLaunch, kCountScanOneLaunch + 1, std::size_t{100000}}) {
    std::vector<std::uint32_t> seed(n);
    for (std::size_t i = 0; i < n; ++i) seed[i] = static_cast<std::uint32_t>(i % 3);
    for (const bool inclusive : {false, true}) {
      DeviceVector<std::uint32_t> out(seed.begin(), seed.end());
      if (inclusive)
        inclusive_count_scan(n, HashedCount{raw(out)}, raw(out));
      else
        exclusive_count_scan(n, HashedCount{raw(out)}, raw(out), std::uint32_t{7});
      std::vector<std::uint32_t> expect(n);
      std::uint32_t run = inclusive ? 0 : 7;
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t f = (static_cast<std::uint32_t>(i * 2654435761u) >> 7) % 10u + seed[i];
        if (inclusive) run += f;
        expect[i] = run;
        if (!inclusive) run += f;
      }
      EXPECT_EQ(host(out), expect) << "n " << n << (inclusive ? " inclusive" : " exclusive");
    }
  }
}

// The fewest lanes per tile that still give a level enough threads: many small tiles take 4,
// few take a warp.
TEST(Octree, TileLanesFillTheDevice) {
  EXPECT_EQ(NodeMoments::lanes_for(1), NodeMoments::kMaxTileLanes);
  EXPECT_EQ(NodeMoments::lanes_for(NodeMoments::kFillThreads / 8), 8u);
  EXPECT_EQ(NodeMoments::lanes_for(NodeMoments::kFillThreads / 8 - 1), 16u);
  EXPECT_EQ(NodeMoments::lanes_for(NodeMoments::kFillThreads), NodeMoments::kMinTileLanes);
}

// With the backend's tiles and with tiles of 64 points (many per node on any backend), and at
// depths 10 and 11 (the Morton keys sorted in 32 and in 64 bits).
TEST(Octree, LevelByLevelEqualsPerNodeReference) {
  struct Case {
    std::uint32_t tile;
    const char* kind;
    int depth;  // 10: the keys sorted in 32 bits; 11: in 64
  };
  const std::uint32_t backend_tile = NodeMoments::default_tile_points();
  for (const auto [tile, kind, depth] :
       {Case{backend_tile, "room", 10}, Case{backend_tile, "staircase", 10}, Case{64u, "room", 10},
        Case{64u, "staircase", 10}, Case{backend_tile, "room", 11}}) {
    SCOPED_TRACE(std::string(kind) + ", tiles of " + std::to_string(tile) + ", depth " +
                 std::to_string(depth));
    const auto points = scene_points(kind, 60000, 0.2);
    const OctreeFrame frame = centred_frame(points);
    OctreeParams params;
    params.seed_octants = params.coplanar_children = true;  // every path the builder has
    params.max_depth = depth;
    OctreeBuilder builder(tile);
    const DeviceVector<Vec4> device(points.begin(), points.end());
    builder.build(device, points.size(), frame, params);

    // The reference sorts on the host (stable, by the same keys).
    std::vector<std::uint64_t> key(points.size());
    for (std::size_t i = 0; i < points.size(); ++i)
      key[i] = morton_code(points[i].x, points[i].y, points[i].z, frame.origin, frame.size,
                           params.max_depth);
    std::vector<std::uint32_t> order(points.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return key[a] < key[b]; });
    EXPECT_EQ(host(builder.order), order);
    std::vector<Vec4> sorted(points.size());
    std::vector<std::uint64_t> sorted_key(points.size());
    for (std::size_t i = 0; i < order.size(); ++i)
      sorted[i] = points[order[i]], sorted_key[i] = key[order[i]];
    ReferenceOctree ref{sorted, sorted_key, params,
                        frame,  {},         std::vector<std::int64_t>(points.size(), -1)};
    std::vector<std::uint32_t> all(points.size());
    std::iota(all.begin(), all.end(), 0u);
    // Level 0 (the root) is never a cluster: start with its eight children, as the device does.
    ref.build(all);

    std::set<std::tuple<int, std::uint64_t, std::uint32_t>> expected(ref.clusters.begin(),
                                                                     ref.clusters.end());
    std::set<std::tuple<int, std::uint64_t, std::uint32_t>> got;
    const auto clusters = host(builder.clusters);
    for (const Cluster& c : clusters) got.emplace(static_cast<int>(c.level), c.node, c.count);
    // Sums in another order may flip a node whose test sits on a threshold: none expected with
    // these sums (the OpenMP reduction adds in the reference's order), at most 0.5% on the GPU,
    // each such node counted three times (itself, and the halves it joins or leaves).
    std::vector<std::tuple<int, std::uint64_t, std::uint32_t>> differ;
    std::set_symmetric_difference(expected.begin(), expected.end(), got.begin(), got.end(),
                                  std::back_inserter(differ));
    EXPECT_LE(differ.size(), 3 * (expected.size() / 200))
        << kind << ": " << differ.size() << " of " << expected.size() << " clusters differ";
    EXPECT_GT(expected.size(), 50u) << kind;
    EXPECT_GT(ref.groups, 5u) << kind << ": sibling halves that pass";
    EXPECT_GT(ref.seeded, 5u) << kind << ": nodes trimmed about an octant's plane";
    std::printf("%s: %zu halves, %zu octant seeds\n", kind, ref.groups, ref.seeded);
    // Each point's cluster: the same node.
    const auto sorted_cluster = host(builder.sorted_cluster);
    std::size_t label_mismatch = 0;
    for (std::size_t i = 0; i < points.size(); ++i) {
      const std::int32_t c = sorted_cluster[i];
      const std::int64_t node = c < 0 ? -1
                                      : static_cast<std::int64_t>(clusters[c].node) +
                                            (std::int64_t{clusters[c].level} << 58);
      label_mismatch += node != ref.point_node[i];
    }
    EXPECT_LE(label_mismatch, points.size() / 200) << kind;

    // The sibling halves with the parents numbered first at every level: the same clusters
    // and labels, bit for bit (the per-node launch differs only in which thread works).
    OctreeBuilder by_parent(tile, 0);
    by_parent.build(device, points.size(), frame, params);
    const auto parent_clusters = host(by_parent.clusters);
    ASSERT_EQ(parent_clusters.size(), clusters.size()) << kind;
    for (std::size_t c = 0; c < clusters.size(); ++c)
      EXPECT_EQ(std::memcmp(&parent_clusters[c], &clusters[c], sizeof(Cluster)), 0)
          << kind << ": cluster " << c;
    EXPECT_EQ(host(by_parent.sorted_cluster), sorted_cluster) << kind;
  }
}

// The sibling halves tested by 8 lanes a parent (OctreeBuilder::halves_by_lanes: each half and
// coplanar seed by a lane of its own, the choices made after) against one thread a parent, with
// the parents numbered first or not: the same clusters and labels. On the CPU the lanes' phases
// run in turn and every bit is the same; on the GPU the compiler places FMAs by the code around
// the arithmetic, so the clusters' sums may differ in their last bits there, never their points.
TEST(Octree, SiblingHalvesByLanesEqualOneThreadAParent) {
  constexpr std::size_t kDoubles = offsetof(Cluster, node) / sizeof(double);
  static_assert(kDoubles == 23, "Cluster: 23 doubles, then the node's integers");
#if defined(__CUDACC__)
  const bool same_bits = false;
#else
  const bool same_bits = true;
#endif
  for (const char* kind : {"room", "staircase"}) {
    SCOPED_TRACE(kind);
    const auto points = scene_points(kind, 60000, 0.2);
    const OctreeFrame frame = centred_frame(points);
    OctreeParams params;
    params.seed_octants = params.coplanar_children = true;
    const DeviceVector<Vec4> device(points.begin(), points.end());
    // Without the halves: the labels differ, so that halves do pass here.
    OctreeParams no_halves = params;
    no_halves.sibling_halves = false;
    OctreeBuilder plain;
    plain.build(device, points.size(), frame, no_halves);
    for (const std::size_t limit : {OctreeBuilder::kHalvesPerNodeLimit, std::size_t{0}}) {
      SCOPED_TRACE("halves_per_node_limit " + std::to_string(limit));
      OctreeBuilder thread(NodeMoments::default_tile_points(), limit);
      OctreeBuilder lanes(NodeMoments::default_tile_points(), limit);
      thread.halves_by_lanes(false);
      lanes.halves_by_lanes(true);
      thread.build(device, points.size(), frame, params);
      lanes.build(device, points.size(), frame, params);
      const auto a = host(thread.clusters), b = host(lanes.clusters);
      ASSERT_EQ(a.size(), b.size());
      EXPECT_GT(a.size(), 50u);
      for (std::size_t c = 0; c < a.size(); ++c) {
        EXPECT_EQ(a[c].node, b[c].node) << "cluster " << c;
        EXPECT_EQ(a[c].level, b[c].level) << "cluster " << c;
        EXPECT_EQ(a[c].count, b[c].count) << "cluster " << c;
        EXPECT_EQ(a[c].begin, b[c].begin) << "cluster " << c;
        EXPECT_EQ(a[c].span, b[c].span) << "cluster " << c;
        const auto* x = reinterpret_cast<const double*>(&a[c]);
        const auto* y = reinterpret_cast<const double*>(&b[c]);
        for (std::size_t k = 0; k < kDoubles; ++k)
          EXPECT_NEAR(x[k], y[k], 1e-9 * (1 + std::fabs(x[k]))) << "cluster " << c << ", " << k;
        if (same_bits) {
          EXPECT_EQ(std::memcmp(&a[c], &b[c], sizeof(Cluster)), 0) << "cluster " << c;
        }
      }
      EXPECT_EQ(host(thread.sorted_cluster), host(lanes.sorted_cluster));
      EXPECT_NE(host(plain.sorted_cluster), host(lanes.sorted_cluster));
    }
  }
}

// The levels above first_level only drop nodes of too few points, which the first tested level
// drops as well: skipping them (the residual round's octree) gives the same clusters and labels,
// bit for bit.
TEST(Octree, SkippedUntestedLevelsGiveTheSameClusters) {
  const auto points = scene_points("room", 60000, 0.2);
  const OctreeFrame frame = centred_frame(points);
  const DeviceVector<Vec4> device(points.begin(), points.end());
  for (const int first : {2, 3}) {
    SCOPED_TRACE("first_level " + std::to_string(first));
    OctreeParams params;
    params.first_level = first;
    OctreeBuilder run, skip;
    skip.skip_untested(true);
    run.build(device, points.size(), frame, params);
    skip.build(device, points.size(), frame, params);
    EXPECT_GT(expect_same_clusters(run, skip), 20u);
    ASSERT_EQ(skip.stats.nodes.size(), run.stats.nodes.size());
    for (int l = 0; l + 1 < first; ++l) EXPECT_EQ(skip.stats.nodes[l], 0u);
  }
}

// A subsequence of a build's Morton order (the residual round's points) is in that order
// already: built as given, without the sort, it gives the sorted build's clusters bit for bit.
TEST(Octree, PointsGivenInMortonOrderGiveTheSortedClusters) {
  const auto points = scene_points("room", 60000, 0.2);
  const OctreeFrame frame = centred_frame(points);
  const DeviceVector<Vec4> device(points.begin(), points.end());
  const OctreeParams params;
  OctreeBuilder first;
  first.build(device, points.size(), frame, params);
  std::vector<Vec4> every_third;
  const auto sorted = host(first.sorted);
  for (std::size_t i = 0; i < sorted.size(); i += 3) every_third.push_back(sorted[i]);
  const DeviceVector<Vec4> subset(every_third.begin(), every_third.end());
  OctreeBuilder sorting, given;
  sorting.build(subset, every_third.size(), frame, params);
  given.build(subset, every_third.size(), frame, params, OctreeBuilder::Order::given);
  EXPECT_GT(expect_same_clusters(sorting, given), 10u);
  EXPECT_EQ(host(sorting.order), host(given.order));
}

// ---- accumulator ------------------------------------------------------------------------------

TEST(Accumulator, NeighbourRelationIsSymmetric) {
  Accumulator acc(12, 5, 1.0);
  const BallLayout b = acc.host_layout();
  std::set<std::pair<std::uint32_t, std::uint32_t>> pairs;
  for (std::uint32_t c = 0; c < b.cells(); ++c) {
    std::set<std::uint32_t> seen;
    for_each_neighbour(b, c, [&](std::uint32_t nb) {
      EXPECT_NE(nb, c);
      EXPECT_TRUE(seen.insert(nb).second) << "neighbour listed twice";
      pairs.emplace(c, nb);
    });
  }
  for (const auto& [a, c] : pairs) EXPECT_TRUE(pairs.count({c, a})) << a << " " << c;
}

TEST(Accumulator, CellsDecodeAndAreasAreEven) {
  const auto start = ball_ring_starts(30);
  Accumulator acc(30, 7, 2.0);
  const BallLayout b = acc.host_layout();
  for (std::uint32_t c = 0; c < b.cells(); ++c) {
    int ring, t, r;
    b.decode(c, ring, t, r);
    EXPECT_EQ(b.cell(ring, t, r), c);
  }
  // Cell areas within a factor 2 of each other away from the poles' single rings.
  for (int j = 2; j < 28; ++j) {
    const double area = (std::cos(j * kPi / 30) - std::cos((j + 1) * kPi / 30)) * 2 * kPi /
                        (start[j + 1] - start[j]);
    const double equator = (kPi / 30) * (kPi / 30);
    EXPECT_GT(area, 0.5 * equator);
    EXPECT_LT(area, 2.0 * equator);
  }
}

struct Stages {
  OctreeBuilder octree;
  std::unique_ptr<Accumulator> acc;
};

std::unique_ptr<Stages> stages_of(const std::vector<Vec4>& points) {
  auto s = std::make_unique<Stages>();
  OctreeFrame frame;
  const CloudBounds bounds(points);
  const double half = bounds.half, rho = bounds.rho;
  frame.size = 2 * half * 1.000001;
  for (double& o : frame.origin) o = -frame.size / 2;
  const DeviceVector<Vec4> device(points.begin(), points.end());
  s->octree.build(device, points.size(), frame, OctreeParams{});
  s->acc = std::make_unique<Accumulator>(30, 100, rho * 1.0001);
  s->acc->vote(s->octree.clusters);
  return s;
}

TEST(Accumulator, VotesEqualTheSumOfEachKernelsCells) {
  const auto s = stages_of(scene_points("boxes", 80000, 0.2));
  const auto clusters = host(s->octree.clusters);
  ASSERT_GT(clusters.size(), 20u);
  const BallLayout b = s->acc->host_layout();
  std::map<std::uint32_t, double> expected;
  double total = 0;
  std::size_t pairs = 0;
  for (const Cluster& c : clusters) {
    const VoteKernel k = make_kernel(c, b);
    bool centre_voted = false;
    int ring = std::min(b.phi_cells - 1, static_cast<int>(k.centre[1] / b.dphi()));
    const int t = static_cast<int>(k.centre[0] / b.dtheta(ring)) % b.theta_cells(ring);
    const int r = std::min(b.rho_cells - 1, static_cast<int>(k.centre[2] / b.drho()));
    for_each_kernel_cell(k, b, [&](std::uint32_t cell, double v) {
      expected[cell] += v;
      total += v;
      ++pairs;
      EXPECT_GE(v, 0);
      EXPECT_LE(v, k.weight * (1 + 1e-12));
      centre_voted = centre_voted || cell == b.cell(ring, t, r);
    });
    EXPECT_TRUE(centre_voted) << "a kernel must vote in its own centre's cell";
  }
  EXPECT_EQ(s->acc->vote_count, pairs);
  const auto votes = host(s->acc->votes);
  double sum = 0;
  for (std::uint32_t c = 0; c < votes.size(); ++c) {
    sum += votes[c];
    const auto it = expected.find(c);
    const double want = it == expected.end() ? 0.0 : it->second;
    EXPECT_NEAR(votes[c], want, 1e-9 * std::max(1.0, want)) << "cell " << c;
  }
  EXPECT_NEAR(sum, total, 1e-9 * total);
}

TEST(Accumulator, AtomicVotesEqualSortedVotes) {
  const auto s = stages_of(scene_points("room", 100000, 0.2));
  const auto sorted = host(s->acc->votes);
  const std::size_t pairs = s->acc->vote_count;
  s->acc->vote(s->octree.clusters, Voting::atomic);
  EXPECT_EQ(s->acc->vote_count, pairs);
  const auto atomic = host(s->acc->votes);
  ASSERT_EQ(atomic.size(), sorted.size());
  double total = 0;
  std::size_t voted = 0;
  for (std::size_t c = 0; c < sorted.size(); ++c) {
    // The same float64 votes summed in another order: round-off of a few ulps per add.
    EXPECT_NEAR(atomic[c], sorted[c], 1e-12 * std::max(1.0, sorted[c])) << "cell " << c;
    EXPECT_EQ(atomic[c] > 0, sorted[c] > 0) << "cell " << c;
    total += sorted[c];
    voted += sorted[c] > 0;
  }
  EXPECT_GT(voted, 1000u);
  EXPECT_GT(total, 0);
  s->acc->smooth();
  const auto atomic_peaks = s->acc->peaks(15);
  s->acc->vote(s->octree.clusters, Voting::sort);
  s->acc->smooth();
  EXPECT_EQ(atomic_peaks, s->acc->peaks(15));
}

TEST(Scenes, AtomicVotingFindsTheSamePlanes) {
  const auto points = scene_points("room", 100000, 0.2);
  const CloudBounds bounds(points);
  const double half = bounds.half, rho = bounds.rho;
  DetectorParams params;
  params.min_plane_points = 200;
  params.merge_distance = 0.01 * rho;
  PlaneDetector sort_detector(MPI_COMM_SELF, params);
  const Detection sorted = sort_detector.detect(points, {0, 0, 0}, half, rho, true);
  params.voting = Voting::atomic;
  PlaneDetector atomic_detector(MPI_COMM_SELF, params);
  const Detection atomic = atomic_detector.detect(points, {0, 0, 0}, half, rho, true);
  ASSERT_GT(sorted.planes.size(), 5u);
  ASSERT_EQ(atomic.planes.size(), sorted.planes.size());
  EXPECT_EQ(atomic.votes, sorted.votes);
  for (std::size_t p = 0; p < sorted.planes.size(); ++p) {
    const Plane &a = atomic.planes[p], &b = sorted.planes[p];
    EXPECT_EQ(a.peak_cell, b.peak_cell) << "plane " << p;
    EXPECT_EQ(a.inliers, b.inliers) << "plane " << p;
    EXPECT_EQ(a.clusters, b.clusters) << "plane " << p;
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(a.normal[k], b.normal[k], 1e-9) << "plane " << p;
    EXPECT_NEAR(a.offset, b.offset, 1e-9 * rho) << "plane " << p;
  }
  EXPECT_EQ(atomic.labels, sorted.labels);
}

TEST(Accumulator, ParallelPeaksEqualSequentialPeaks) {
  const auto s = stages_of(scene_points("room", 100000, 0.2));
  s->acc->smooth();
  const double min_value = 15;
  const auto peaks = s->acc->peaks(min_value);
  ASSERT_GE(peaks.size(), 6u);
  // Sequential: the low-pass filter by hand, then cells in order of priority (smoothed value,
  // then lower index), a cell being a peak when no neighbour came before it.
  const BallLayout b = s->acc->host_layout();
  const auto votes = host(s->acc->votes);
  std::vector<double> smooth(votes.size());
  for (std::uint32_t c = 0; c < votes.size(); ++c) {
    double sum = 0;
    int n = 0;
    for_each_neighbour(b, c, [&](std::uint32_t nb) { sum += votes[nb], ++n; });
    smooth[c] = 0.5 * votes[c] + (n ? 0.5 * sum / n : 0.5 * votes[c]);
  }
  const auto device_smooth = host(s->acc->smoothed);
  for (std::size_t c = 0; c < smooth.size(); ++c)
    EXPECT_NEAR(device_smooth[c], smooth[c], 1e-9 * (1 + smooth[c]));
  std::vector<std::uint32_t> order(votes.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](auto a, auto c) {
    return device_smooth[a] != device_smooth[c] ? device_smooth[a] > device_smooth[c] : a < c;
  });
  std::vector<char> visited(votes.size(), 0);
  std::vector<std::uint32_t> expected;
  for (const std::uint32_t c : order) {
    bool peak = !visited[c];
    for_each_neighbour(b, c, [&](std::uint32_t nb) { visited[nb] = 1; });
    visited[c] = 1;
    // visited here: some neighbour of c came earlier, so c is not above all of them
    if (peak && votes[c] > 0 && device_smooth[c] >= min_value) expected.push_back(c);
  }
  EXPECT_EQ(peaks, expected);
}

// The pairs written a thread a pair (the kernel found among the offsets, the cell from its rank
// in the kernel's box) against each kernel's cells listed in turn on the host, both stably sorted
// by cell: the same cells and pair indices, and the same votes up to the device's contractions.
TEST(Accumulator, VotePairsEqualEachKernelsCellsInOrder) {
  const auto s = stages_of(scene_points("room", 100000, 0.2));
  const Accumulator::VotePairs pairs = s->acc->sorted_pairs();
  const BallLayout b = s->acc->host_layout();
  const auto kernels = host(s->acc->kernels);
  ASSERT_GE(kernels.size(), s->acc->kernel_count);
  std::vector<std::uint32_t> cells, ids;
  std::vector<double> values;
  std::size_t widest = 0;
  for (std::size_t c = 0; c < s->acc->kernel_count; ++c) {
    const std::size_t before = cells.size();
    for_each_kernel_cell(kernels[c], b, [&](std::uint32_t cell, double v) {
      ids.push_back(static_cast<std::uint32_t>(cells.size()));
      cells.push_back(cell);
      values.push_back(v);
    });
    widest = std::max(widest, cells.size() - before);
  }
  EXPECT_GT(widest, 27u) << "some kernel should span several rings, thetas and rhos";
  std::vector<std::uint32_t> order(cells.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t c) { return cells[a] < cells[c]; });
  ASSERT_EQ(pairs.cells.size(), order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    ASSERT_EQ(pairs.cells[i], cells[order[i]]) << "pair " << i;
    ASSERT_EQ(pairs.ids[i], ids[order[i]]) << "pair " << i;
    ASSERT_NEAR(pairs.values[i], values[order[i]], 1e-12 * std::max(1.0, values[order[i]]))
        << "pair " << i;
  }
}

// The peaks assigned on the device (on the GPU a warp per kernel, a lane per peak) against
// nearest_peak on the host, kernel by kernel.
TEST(Accumulator, AssignedPeaksEqualNearestPeak) {
  const auto s = stages_of(scene_points("room", 100000, 0.2));
  s->acc->smooth();
  const std::vector<std::uint32_t> peaks = s->acc->peaks(5);
  ASSERT_GE(peaks.size(), 6u);
  const DeviceVector<std::uint32_t> peak_cells(peaks.begin(), peaks.end());
  DeviceVector<std::int32_t> assigned;
  const std::size_t count = s->acc->kernel_count;
  assign_clusters(s->acc->kernels, count, s->acc->layout(), peak_cells, assigned);
  const auto got = host(assigned);
  const auto kernels = host(s->acc->kernels);
  const BallLayout b = s->acc->host_layout();
  std::size_t matched = 0;
  for (std::size_t c = 0; c < count; ++c) {
    const int want = nearest_peak(kernels[c], b, peaks.data(), static_cast<int>(peaks.size()));
    EXPECT_EQ(got[c], want) << "kernel " << c;
    matched += want >= 0;
  }
  EXPECT_GT(matched, count / 4);
}

// ---- the split over ranks --------------------------------------------------------------------

// The grid against a per-point reference: a floor (one plane: its cells pass the node test) and
// a block of uniform points (its cells fail), 2.2M points, so that the sums run in several chunks.
TEST(Split, GridEqualsPerPointReferenceAndCutsBalance) {
  Cloud cloud(2200000);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (std::size_t i = 0; i < cloud.size(); ++i)
    cloud[i] = i % 2 == 0 ? std::array<double, 3>{8 * u(rng), 8 * u(rng), 0.001 * u(rng)}
                          : std::array<double, 3>{4 + 4 * u(rng), 8 * u(rng), 8 * u(rng)};
  const OctreeParams params;
  const double size = 8 * (1 + 1e-6);
  const SplitGrid grid = bin_cloud(cloud, {4, 4, 4}, size, params);
  ASSERT_EQ(grid.level, params.first_level + 2);
  std::vector<std::uint32_t> count(grid.count.size(), 0);
  for (std::size_t i = 0; i < cloud.size(); ++i) {
    const std::uint32_t c = grid.cell_of(cloud[i]);
    ASSERT_EQ(grid.point_cell[i], c);
    ++count[c];
    for (int d = 0; d < 3; ++d)
      ASSERT_TRUE(grid.box[c][d] <= cloud[i][d] && cloud[i][d] <= grid.box[c][3 + d]);
  }
  EXPECT_EQ(grid.count, count);
  // Per point: on the floor, the untested levels and the first tested one, where its node passes;
  // in the block, whose cells fail the test, more than the levels down to the estimate's.
  const double untested = kUntestedLevelWork * (params.first_level - 1);
  const double base = untested + (grid.cost_level - params.first_level + 1);
  const std::uint32_t floor_cell = grid.cell_of({1, 1, 0.0005});
  const std::uint32_t block_cell = grid.cell_of({5, 5, 5});
  EXPECT_NEAR(grid.cost[floor_cell] / grid.count[floor_cell], untested + 1, 1e-12);
  EXPECT_GT(grid.cost[block_cell] / grid.count[block_cell], base + 0.5);
  // By count, two ranks get halves to within a slice of the cut level; by cost, the estimated
  // work is more equal than by count.
  auto shares = [&](bool by_cost, bool work) {
    const std::vector<int> owner = rcb_cells(grid, 2, by_cost);
    std::array<double, 2> s{0, 0};
    for (std::size_t c = 0; c < owner.size(); ++c)
      s[static_cast<std::size_t>(owner[c])] += work ? grid.cost[c] : grid.count[c];
    return s;
  };
  const auto by_count = shares(false, false);
  EXPECT_NEAR(by_count[0] / cloud.size(), 0.5, 1.0 / (1 << grid.cut_level));
  const auto cost_of_count = shares(false, true), cost_of_cost = shares(true, true);
  auto imbalance = [](std::array<double, 2> s) { return std::max(s[0], s[1]) / (s[0] + s[1]); };
  EXPECT_LT(imbalance(cost_of_cost), imbalance(cost_of_count));
}

// ---- whole scenes against the ground truth ------------------------------------------------------

struct SceneCase {
  const char* kind;
  long points;
  double noise;
};

TEST(Scenes, EveryPlaneFoundWithinTolerances) {
  // 20% outliers; the minimum a plane needs is the configured min_plane_points.
  for (const SceneCase& sc :
       {SceneCase{"boxes", 200000, 0.001}, SceneCase{"staircase", 200000, 0.001},
        SceneCase{"roof", 200000, 0.001}, SceneCase{"room", 200000, 0.0005}}) {
    const std::string yaml = std::string("  input: {scene: ") + sc.kind +
                             ", points: " + std::to_string(sc.points) +
                             ", noise: " + std::to_string(sc.noise) +
                             ", outliers: 0.2}\n  point_output: false\n  min_plane_points: 1000\n";
    const auto run = run_case(yaml, self_ranks());
    const GroundTruthScore* s = run->workload->score();
    ASSERT_NE(s, nullptr);
    // The room's sofa sides (0.45 m strips between floor and seat) and the cabinet's narrow side
    // hold ~2000 points but few octree nodes lie on them alone: required are planes with twice
    // the minimum.
    std::size_t required = 0, found = 0;
    for (std::size_t g = 0; g < s->truth_points.size(); ++g) {
      if (s->truth_points[g] < 2 * 1000) continue;
      ++required;
      found += std::count(s->match.begin(), s->match.end(), static_cast<int>(g)) > 0;
    }
    EXPECT_EQ(found, required) << sc.kind;
    EXPECT_LT(s->max_normal_error_deg, 2.0) << sc.kind;
    EXPECT_LT(s->max_offset_error, 0.01 * s->scene_size) << sc.kind;
    EXPECT_EQ(s->unmatched_detected, 0u) << sc.kind;
    std::printf(
        "%-10s planes %zu of %zu, normal error %.3f deg, offset error %.3f%%, "
        "precision %.4f recall %.4f F1 %.4f\n",
        sc.kind, found, required, s->max_normal_error_deg,
        100 * s->max_offset_error / s->scene_size, s->precision, s->recall, s->f1);
  }
}

// An open staircase (treads only) and shelving (stacked boards), with clutter. Every
// tread and every board found within 2 degrees and 1% of the scene, and no plane that matches no
// true surface; with the slab test and the orphans' recovery off (the paper's behaviour), the
// staircase shows the phantom and the missed treads that the issue reported.
struct TreadCheck {
  std::size_t found = 0, wanted = 0;
  double worst_angle = 0, worst_offset = 0;
};

TreadCheck check_named(const std::string& kind, const GroundTruthScore& s,
                       const std::vector<Plane>& planes, const std::string& prefix) {
  const Scene scene = make_scene(kind);
  TreadCheck t;
  for (std::size_t g = 0; g < scene.planes.size(); ++g) {
    if (scene.planes[g].name.rfind(prefix, 0) != 0) continue;
    ++t.wanted;
    const auto it = std::find(s.match.begin(), s.match.end(), static_cast<int>(g));
    if (it == s.match.end()) continue;
    ++t.found;
    const Plane& p = planes[static_cast<std::size_t>(it - s.match.begin())];
    const auto& n = scene.planes[g].normal;
    const double c = p.normal[0] * n[0] + p.normal[1] * n[1] + p.normal[2] * n[2];
    t.worst_angle = std::max(t.worst_angle, std::acos(std::min(1.0, std::fabs(c))) * 180 / kPi);
    t.worst_offset =
        std::max(t.worst_offset, std::fabs(p.offset - (c < 0 ? -1 : 1) * scene.planes[g].offset));
  }
  return t;
}

std::string scene_yaml(const std::string& kind, long points, const std::string& extra = "") {
  return "  input: {scene: " + kind + ", points: " + std::to_string(points) +
         ", noise: 0.001, outliers: 0.2}\n  point_output: false\n" + extra;
}

TEST(Scenes, StackedAndSmallPlanesWithoutPhantoms) {
  for (const auto& [kind, prefix] : {std::pair<std::string, std::string>{"stairs", "tread"},
                                     std::pair<std::string, std::string>{"shelving", "board"}}) {
    const auto run =
        run_case(scene_yaml(kind, 150000,
                            "  residual_pass: true\n"
                            "  octree: {seed_octants: true, coplanar_children: true}\n"),
                 self_ranks());
    const GroundTruthScore* s = run->workload->score();
    ASSERT_NE(s, nullptr);
    const TreadCheck t = check_named(kind, *s, run->workload->detection().planes, prefix);
    std::printf("%-9s %s %zu of %zu (worst %.3f deg, %.3f%%), unmatched %zu, F1 %.4f\n",
                kind.c_str(), prefix.c_str(), t.found, t.wanted, t.worst_angle,
                100 * t.worst_offset / s->scene_size, s->unmatched_detected, s->f1);
    EXPECT_EQ(s->unmatched_detected, 0u) << kind;
    EXPECT_LT(t.worst_angle, 2.0) << kind;
    EXPECT_LT(t.worst_offset, 0.01 * s->scene_size) << kind;
    EXPECT_GE(s->f1, 0.9) << kind;
    EXPECT_EQ(t.found, t.wanted) << kind;
    // The stairs' box b top (590 points, 0.27 m up: 9 cm from treads 1 and 2): its clusters of
    // 40-60 points tilt 2-4 degrees from noise alone; with a fixed 3-degree limit two of them
    // were left out and the rest (294 points) fell short of the minimum (300).
    // Box a's side -y (775 points, rotated 0.4 rad): its nodes at the box's edges also hold the
    // top or the floor, and their planes of all points lean between the two; only the octant
    // seeds (seed_octants) bring enough of it to clusters.
    // The boxes' other sides (361-680 points): their nodes at the box's edges also hold the top,
    // the floor or the next side, so the octree takes 10-60% of their points into clusters; the
    // residual round (residual_pass) finds them among the points the first round left. Box b's
    // side +x (308 points against the minimum of 300): 20-30 of its points lie in the floor's
    // and the box top's clusters, off those planes' bands; the round takes them back
    // (residual_reclaim).
    if (kind == "stairs") {
      for (const char* face : {"box b top", "box a side -y", "box a side +y", "box a side -x",
                               "box a side +x", "box b side -y", "box b side +y", "box b side +x"})
        EXPECT_EQ(check_named(kind, *s, run->workload->detection().planes, face).found, 1u) << face;
      EXPECT_EQ(s->found_required, s->required);
    }
  }
  // Faces just over the minimum of points, each missed before: box b's side +x of the 400k
  // staircase, seed 1 (826 points, minimum 800) keeps 716 of them, the rest lie within the noise
  // of the floor and the sides beside it, and it counts the points it shares with them; seed 5's
  // side +y at 150k (391 points) came as two candidates of ~200, a degree apart, now one; seed
  // 2's side +x at 150k (311 points) gave no candidate with the votes of 0.25 of min_votes.
  // Seed 6 at 150k: a first-round plane bridged box a top and tread 2 where they stand side by
  // side, 9 cm apart, tilted 2.9 degrees, and tread 2 was missed (PlaneFitter::split_bridges).
  // Seed 9 at 150k: tread 3 (976 points) and box a top, 9 cm apart, voted into one peak whose
  // seed was a 55-point cluster tilted 5 degrees; tread 3's five clusters (762 points) left it,
  // and three of them were refused as fragments skewed off that tilted fit, so tread 3 was missed
  // in both rounds (PlaneFitter::skewed_fragment).
  for (const auto& [points, seed] :
       {std::pair<long, int>{400000, 1}, {150000, 5}, {150000, 2}, {150000, 6}, {150000, 9}}) {
    const auto run = run_case("  input: {scene: stairs, points: " + std::to_string(points) +
                                  ", seed: " + std::to_string(seed) +
                                  ", noise: 0.001, outliers: 0.2}\n"
                                  "  point_output: false\n  residual_pass: true\n",
                              self_ranks());
    const GroundTruthScore* s = run->workload->score();
    const TreadCheck all = check_named("stairs", *s, run->workload->detection().planes, "");
    EXPECT_EQ(s->found_required, s->required) << points << " points, seed " << seed;
    EXPECT_EQ(s->unmatched_detected, 0u) << points << " points, seed " << seed;
    EXPECT_LT(all.worst_angle, 2.0) << points << " points, seed " << seed;
  }
  // Shelving's lowest board, 0.15 m above the floor: nodes small enough to hold it without the
  // floor (0.094 m) are thinner than 17.3 noise deviations (7.8 mm) and fail the thickness test,
  // at any point count; halves of their parents pass. Without the halves it is missed.
  for (const char* halves : {"true", "false"}) {
    const auto run =
        run_case(scene_yaml("shelving", 400000,
                            std::string("  residual_pass: false\n  octree: {sibling_halves: ") +
                                halves + "}\n"),
                 self_ranks());
    const GroundTruthScore* s = run->workload->score();
    const TreadCheck boards =
        check_named("shelving", *s, run->workload->detection().planes, "board");
    EXPECT_EQ(s->unmatched_detected, 0u) << "halves " << halves;
    if (std::string(halves) == "true")
      EXPECT_EQ(boards.found, boards.wanted);
    else
      EXPECT_EQ(boards.found, boards.wanted - 1);
  }
  // The paper's test: treads missed and a plane that is not there.
  const auto paper = run_case(scene_yaml("stairs", 150000,
                                         "  recover_orphans: false\n  residual_pass: false\n"
                                         "  octree: {slab_kurtosis: 0, sibling_halves: false}\n"),
                              self_ranks());
  const GroundTruthScore* s = paper->workload->score();
  const TreadCheck t = check_named("stairs", *s, paper->workload->detection().planes, "tread");
  EXPECT_GT(s->unmatched_detected, 0u);
  EXPECT_LT(t.found, t.wanted);
}

TEST(Scenes, RoomF1) {
  // The paper's inliers (the clusters' points) and with growing into the planes' bands.
  for (double band : {0.0, 3.0}) {
    const auto run = run_case(
        "  input: {scene: room, points: 1000000, noise: 0.0005, outliers: 0.2}\n"
        "  point_output: false\n  grow_band: " +
            std::to_string(band) + "\n",
        self_ranks());
    const GroundTruthScore* s = run->workload->score();
    std::printf("room 1M, grow_band %.0f: precision %.4f recall %.4f F1 %.4f\n", band, s->precision,
                s->recall, s->f1);
    // The bar: 0.95 on the room with growing; the paper's inliers stay above 0.9.
    EXPECT_GE(s->f1, band > 0 ? 0.95 : 0.9) << "grow_band " << band;
  }
}

TEST(Scenes, RectanglesHoldExactlyTheInliers) {
  // The oriented rectangle of each plane against its labelled points, projected by hand.
  const auto run = run_case(
      "  input: {scene: boxes, points: 100000, noise: 0.001, outliers: 0.2}\n"
      "  point_output: false\n",
      self_ranks());
  const auto& planes = run->workload->detection().planes;
  const auto& labels = run->workload->detection().labels;
  const auto& index = run->workload->local_index();
  ASSERT_FALSE(planes.empty());
  SceneSpec spec;
  spec.kind = "boxes", spec.points = 100000, spec.noise = 0.001, spec.outliers = 0.2;
  const Scene scene = make_scene("boxes");
  std::vector<std::array<double, 4>> extent(planes.size(), {1e300, -1e300, 1e300, -1e300});
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0) continue;
    const Plane& p = planes[labels[i]];
    int truth = 0;
    const auto x = scene.point(spec, index[i], truth);
    double u = 0, v = 0;
    for (int d = 0; d < 3; ++d) {
      u += (x[d] - p.centroid[d]) * p.axis_u[d];
      v += (x[d] - p.centroid[d]) * p.axis_v[d];
    }
    auto& e = extent[labels[i]];
    e = {std::min(e[0], u), std::max(e[1], u), std::min(e[2], v), std::max(e[3], v)};
  }
  // Tolerance: float coordinates on the device (a scene of ~14 m: ~1e-6 of it) and float
  // projections.
  const double tolerance = 1e-5 * scene.diagonal;
  for (std::size_t p = 0; p < planes.size(); ++p) {
    EXPECT_NEAR(planes[p].u_min, extent[p][0], tolerance) << "plane " << p;
    EXPECT_NEAR(planes[p].u_max, extent[p][1], tolerance) << "plane " << p;
    EXPECT_NEAR(planes[p].v_min, extent[p][2], tolerance) << "plane " << p;
    EXPECT_NEAR(planes[p].v_max, extent[p][3], tolerance) << "plane " << p;
  }
}

// The rectangles by the default extent path (on the GPU per-block atomic minima and maxima)
// equal those of the portable one (a sort by label, then segmented reductions).
TEST(Scenes, ExtentPathsAgree) {
  const auto points = scene_points("boxes", 100000, 0.2);
  const CloudBounds bounds(points);
  const double half = bounds.half, rho = bounds.rho;
  DetectorParams params;
  params.min_plane_points = 200;
  params.merge_distance = 0.01 * rho;
  PlaneDetector detector(MPI_COMM_SELF, params);
  const Detection fast = detector.detect(points, {0, 0, 0}, half, rho, false);
  detector.set_sorted_extents(true);
  const Detection sorted = detector.detect(points, {0, 0, 0}, half, rho, false);
  ASSERT_GT(fast.planes.size(), 5u);
  ASSERT_EQ(fast.planes.size(), sorted.planes.size());
  for (std::size_t p = 0; p < fast.planes.size(); ++p) {
    const Plane &a = fast.planes[p], &b = sorted.planes[p];
    const double tolerance = 1e-6 * rho;  // the same float projections (bar an FMA)
    EXPECT_NEAR(a.u_min, b.u_min, tolerance) << "plane " << p;
    EXPECT_NEAR(a.u_max, b.u_max, tolerance) << "plane " << p;
    EXPECT_NEAR(a.v_min, b.v_min, tolerance) << "plane " << p;
    EXPECT_NEAR(a.v_max, b.v_max, tolerance) << "plane " << p;
    EXPECT_LT(a.u_min, a.u_max) << "plane " << p;
  }
}

// Points given as packed x, y, z floats (how the workload keeps them: a quarter of the upload
// less) give the Vec4 path's planes and labels bit for bit: the device widens them to the same
// Vec4s. Also when they are uploaded in many chunks, the last one short, each chunk widened and
// given its octree keys as it lands (the keys then not computed by the octree's build).
TEST(Scenes, PackedPointsEqualVec4Points) {
  const auto points = scene_points("boxes", 100000, 0.2);
  const CloudBounds bounds(points);
  DetectorParams params;
  params.min_plane_points = 200;
  PlaneDetector detector(MPI_COMM_SELF, params);
  const Detection wide = detector.detect(points, {0, 0, 0}, bounds.half, bounds.rho, true);
  std::vector<float> xyz;
  for (const Vec4& p : points) xyz.insert(xyz.end(), {p.x, p.y, p.z});
  const Detection packed =
      detector.detect(std::span<const float>(xyz), {0, 0, 0}, bounds.half, bounds.rho, true);
  detector.set_upload_chunk_points(7777);  // 13 chunks of 100k points, the last shorter
  const Detection chunked =
      detector.detect(std::span<const float>(xyz), {0, 0, 0}, bounds.half, bounds.rho, true);
  ASSERT_GT(wide.planes.size(), 5u);
  for (const Detection* other : {&packed, &chunked}) {
    ASSERT_EQ(wide.planes.size(), other->planes.size());
    for (std::size_t p = 0; p < wide.planes.size(); ++p) {
      const Plane &a = wide.planes[p], &b = other->planes[p];
      EXPECT_EQ(a.normal, b.normal) << "plane " << p;
      EXPECT_EQ(a.offset, b.offset) << "plane " << p;
      EXPECT_EQ(a.inliers, b.inliers) << "plane " << p;
      EXPECT_EQ(a.u_min, b.u_min) << "plane " << p;
      EXPECT_EQ(a.v_max, b.v_max) << "plane " << p;
    }
    EXPECT_EQ(wide.labels, other->labels);
  }
  EXPECT_THROW(detector.detect(std::span<const float>(xyz.data(), 4), {0, 0, 0}, bounds.half,
                               bounds.rho, false),
               std::invalid_argument);
}

// The residual round's grouped sums (on the GPU: sorted by group, up to 1024 lanes a group, totals
// in two levels) against sums on the host in the points' order: counts exact, every other sum
// within 1e-12 of the sum of its terms' magnitudes (the order differs). Twice with one scratch:
// a smaller second call reuses the larger arrays (their stale entries past the count unread).
TEST(Residual, GroupedSumsEqualHostSums) {
  apron::planes::GroupScratch scratch;
  DeviceVector<Moments> partials;
  std::mt19937 rng(31);
  for (const auto& [n, groups] : {std::pair<int, int>{200000, 7}, {3000, 3}, {5, 2}}) {
    std::uniform_real_distribution<float> u(-2, 3);
    std::uniform_int_distribution<int> pick(-1, groups);  // -1 and `groups`: in no group
    std::vector<Vec4> points(static_cast<std::size_t>(n));
    std::vector<std::int32_t> group(points.size());
    for (std::size_t i = 0; i < points.size(); ++i) {
      points[i] = Vec4{u(rng), u(rng), u(rng), 0.f};
      const int g = pick(rng);
      group[i] = g == groups ? -1 : g;
    }
    const DeviceVector<Vec4> d_points(points.begin(), points.end());
    const DeviceVector<std::int32_t> d_group(group.begin(), group.end());
    const std::vector<Moments> sums = apron::planes::grouped_moments(
        d_points, d_group, static_cast<std::size_t>(groups), scratch, partials);
    ASSERT_EQ(sums.size(), static_cast<std::size_t>(groups));
    std::vector<Moments> want(sums.size()), scale(sums.size());
    for (std::size_t i = 0; i < points.size(); ++i) {
      if (group[i] < 0) continue;
      const Vec4 p = points[i];
      want[static_cast<std::size_t>(group[i])].add(p.x, p.y, p.z);
      scale[static_cast<std::size_t>(group[i])].add(std::fabs(p.x), std::fabs(p.y), std::fabs(p.z));
    }
    for (std::size_t g = 0; g < sums.size(); ++g) {
      EXPECT_EQ(sums[g].count, want[g].count) << n << " points, group " << g;
      for (int d = 0; d < 3; ++d)
        EXPECT_NEAR(sums[g].s[d], want[g].s[d], 1e-12 * scale[g].s[d]) << n << " " << g;
      for (int k = 0; k < 6; ++k)
        EXPECT_NEAR(sums[g].ss[k], want[g].ss[k], 1e-12 * scale[g].ss[k]) << n << " " << g;
    }
  }
}

TEST(Scenes, NoPlaneGivesAnEmptyResult) {
  const auto file = scratch_dir(MPI_COMM_SELF) / "random.xyz";
  {
    std::mt19937 rng(11);
    std::uniform_real_distribution<double> u(0, 1);
    std::ofstream out(file);
    for (int i = 0; i < 40000; ++i) out << u(rng) << " " << u(rng) << " " << u(rng) << "\n";
  }
  const auto run =
      run_case("  input: {file: " + file.string() + "}\n  point_output: false\n", self_ranks());
  EXPECT_TRUE(run->workload->detection().planes.empty());
  for (std::int32_t l : run->workload->detection().labels) EXPECT_EQ(l, -1);
}

// ---- ranks -----------------------------------------------------------------------------------

void expect_same_planes_and_labels(const std::string& yaml) {
  const RankInfo world = RankInfo::world();
  const auto all = run_case(yaml, world);
  const auto one = run_case(yaml, self_ranks());
  const auto& a = all->workload->detection().planes;
  const auto& b = one->workload->detection().planes;
  ASSERT_EQ(a.size(), b.size());
  std::vector<int> same(a.size(), -1);  // plane of the split run -> plane of the one-rank run
  for (std::size_t p = 0; p < a.size(); ++p) {
    double best = 180;
    for (std::size_t q = 0; q < b.size(); ++q) {
      double c = 0;
      for (int d = 0; d < 3; ++d) c += a[p].normal[d] * b[q].normal[d];
      if (std::fabs(a[p].offset - (c < 0 ? -b[q].offset : b[q].offset)) > 0.01) continue;
      const double angle = std::acos(std::min(1.0, std::fabs(c))) * 180 / kPi;
      if (angle < best) best = angle, same[p] = static_cast<int>(q);
    }
    EXPECT_LT(best, 0.5) << "plane with " << a[p].inliers << " inliers";
  }
  // Labels, gathered by point index: the same plane for every point (the split follows the
  // octree's cells, so no node is cut below the coarsest tested level).
  const auto& labels = all->workload->detection().labels;
  const auto& index = all->workload->local_index();
  const int mine = static_cast<int>(labels.size());
  std::vector<int> counts(world.size), offsets(world.size);
  MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, world.comm);
  for (int k = 1; k < world.size; ++k) offsets[k] = offsets[k - 1] + counts[k - 1];
  const int total = offsets.back() + counts.back();
  std::vector<std::int32_t> all_labels(total);
  std::vector<std::uint64_t> all_index(total);
  MPI_Allgatherv(labels.data(), mine, MPI_INT32_T, all_labels.data(), counts.data(), offsets.data(),
                 MPI_INT32_T, world.comm);
  MPI_Allgatherv(index.data(), mine, MPI_UINT64_T, all_index.data(), counts.data(), offsets.data(),
                 MPI_UINT64_T, world.comm);
  const auto& reference = one->workload->detection().labels;  // in cloud order (one rank)
  ASSERT_EQ(static_cast<std::size_t>(total), reference.size());
  std::size_t differ = 0;
  for (int k = 0; k < total; ++k) {
    const int l = all_labels[k];
    differ += (l < 0 ? -1 : same[l]) != reference[all_index[k]];
  }
  EXPECT_LE(differ, reference.size() / 1000) << differ << " labels differ";
  std::printf(
      "%d ranks: %zu planes, %zu of %d labels differ from one rank, F1 %.4f (one rank %.4f)\n",
      world.size, a.size(), differ, total, all->workload->score()->f1, one->workload->score()->f1);
}

TEST(Ranks, SamePlanesAndLabelsOnAnyRankCount) {
  expect_same_planes_and_labels(
      "  input: {scene: room, points: 200000, noise: 0.0005, outliers: 0.2}\n"
      "  point_output: false\n");
}

// Planes recovered from orphan clusters (gathered over the ranks) are the same on any split.
TEST(Ranks, StairsAndShelvingSamePlanesOnAnyRankCount) {
  // The stairs with the residual round: its candidates' inliers and refits are summed over the
  // ranks as well.
  expect_same_planes_and_labels(scene_yaml("stairs", 150000, "  residual_pass: true\n"));
  expect_same_planes_and_labels(scene_yaml("shelving", 150000));
}

// The split by estimated octree work (balance: cost, the default) against the split by point
// count: the same planes as one rank with either, and the ranks' work (measured: the points active
// per octree level, summed) at least as even with the cost split, its estimate more even.
TEST(Ranks, CostSplitBalancesOctreeWorkBetterThanCount) {
  const RankInfo world = RankInfo::world();
  const std::string yaml = scene_yaml("room", 200000);
  expect_same_planes_and_labels(yaml + "  balance: count\n");
  if (world.size == 1) GTEST_SKIP() << "one rank: nothing to balance";
  auto imbalance = [](const std::vector<double>& v) {  // the most over the mean
    double most = 0, sum = 0;
    for (double x : v) most = std::max(most, x), sum += x;
    return most * static_cast<double>(v.size()) / sum;
  };
  const auto count = run_case(yaml + "  balance: count\n", world);
  const auto cost = run_case(yaml + "  balance: cost\n", world);
  const double measured[2] = {imbalance(count->workload->detection().octree_work),
                              imbalance(cost->workload->detection().octree_work)};
  const double estimated[2] = {imbalance(count->workload->estimated_work()),
                               imbalance(cost->workload->estimated_work())};
  std::printf(
      "%d ranks: octree work, most over mean: by count %.3f, by cost %.3f (estimated %.3f, "
      "%.3f)\n",
      world.size, measured[0], measured[1], estimated[0], estimated[1]);
  EXPECT_LE(estimated[1], estimated[0] + 1e-9);
  // The cost split cuts only faces of the level-2 cells (4 along an axis, none cut): 0.02 of
  // slack for that granularity (3 ranks: 1.156 against 1.179 by count).
  EXPECT_LE(measured[1], measured[0] + 0.02);
  if (world.size != 3) {  // 2 and 4: clearly better
    EXPECT_LT(measured[1], measured[0] - 0.05);
  }
}

}  // namespace
}  // namespace apron::planes
