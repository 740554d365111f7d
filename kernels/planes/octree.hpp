// Octree clustering of 3D-KHT (issue 16, "The method" 1), built level by level instead of by
// recursion: one sort of the points by Morton code at the deepest level; at level l the nodes are
// the runs of equal top-3l-bit prefix among the points still undecided; per node the covariance
// by segmented float64 reductions, its eigen-decomposition and the coplanarity test. Nodes that
// pass are clusters (their points leave), nodes too small are dropped (their points leave), the
// others are split at the next level.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/common/backend.hpp"
#include "kernels/common/vec.hpp"
#include "kernels/planes/plane_math.hpp"

namespace apron::planes {

// The octree's root cube. Every rank uses the same one (the global bounding cube), so that a
// node cut by a rank boundary is the same node, split, on both sides.
struct OctreeFrame {
  double origin[3] = {0, 0, 0};
  double size = 1;
};

// A cluster of approximately coplanar points: an octree node that passed the test.
struct Cluster {
  double mean[3];      // centroid
  double cov[6];       // covariance (xx xy xz yy yz zz), divided by count
  double normal[3];    // unit, the smallest eigenvalue's eigenvector, oriented so normal.mean >= 0
  double axis_mid[3];  // unit in-plane axes: the middle and largest eigenvalues' eigenvectors
  double axis_max[3];
  double eig[3];        // eigenvalues, ascending
  double d2, d4;        // trimmed nodes: sums of squared and fourth-power distances off the plane
  std::uint64_t node;   // the node's Morton prefix at its level
  std::uint32_t count;  // its points (the node's points within the trim distance of its plane)
  std::uint32_t level;
  std::uint32_t begin;  // its points are among sorted positions [begin, begin + span): the
  std::uint32_t span;   // node's run of the Morton order
};

// A cluster from a node's moments (host and device; the reference uses it as well).
APRON_HD inline Cluster make_cluster(const Moments& m, const double ref[3], const Eigen3& e,
                                     std::uint64_t node, int level, std::uint32_t begin,
                                     std::uint32_t span) {
  Cluster c{};
  double mean[3];
  const Sym3 cov = m.covariance(mean);
  for (int d = 0; d < 3; ++d) c.mean[d] = mean[d] + ref[d];
  for (int k = 0; k < 6; ++k) c.cov[k] = cov.m[k];
  const double dot = e.vec[0][0] * c.mean[0] + e.vec[1][0] * c.mean[1] + e.vec[2][0] * c.mean[2];
  const double sign = dot < 0 ? -1.0 : 1.0;
  for (int d = 0; d < 3; ++d) {
    c.normal[d] = sign * e.vec[d][0];
    c.axis_mid[d] = e.vec[d][1];
    c.axis_max[d] = e.vec[d][2];
    c.eig[d] = e.value[d];
  }
  c.d2 = m.d2;
  c.d4 = m.d4;
  c.node = node;
  c.count = static_cast<std::uint32_t>(m.count);
  c.level = static_cast<std::uint32_t>(level);
  c.begin = begin;
  c.span = span;
  return c;
}

// The moments of every node of a level in one pass over its points, deterministic: each node's
// run of active points is cut into tiles of `tile_points`; a tile's sums (on the GPU a group of
// lanes per tile, lanes strided, a butterfly at the end; elsewhere one thread, in order) go to a
// partial, and each node sums its tiles' partials in order. Two launches per pass instead of a term
// array per moment and one segmented reduction per term, and no node's size limits the parallelism.
// The sums are relative to the node's first point (sorted[active[starts[s]]]). With a fit (7
// doubles per node: normal, mean relative to that point, band) only the points within the band of
// the node's plane count, and `inlier` (per active point) says which did.
class NodeMoments {
 public:
  // Tiles of 512 points on the GPU (16 per lane of a warp); elsewhere a whole node is one tile, so
  // that the sums add in the points' order.
  static std::uint32_t default_tile_points();
  // A level of at most small_level_points active points takes tiles of at most
  // kSmallLevelTilePoints (4 per lane of a warp): a small level's pass time is each lane's chain
  // of loads. By default 2^19 on the GPU (at 2^20, 1M points over 32 nodes held 244 tiles a node,
  // and their totals lost more than the tiles gained); elsewhere 0, off.
  static std::size_t default_small_level_points();
  static constexpr std::uint32_t kSmallLevelTilePoints = 128;

  // On the GPU the nodes' totals take a warp per node while the nodes are fewer than
  // warp_node_limit (about the warps the GPU holds at once), beyond it a thread per node: a warp
  // per node there leaves 31 lanes idle while one computes the node's fit (a float64
  // eigen-decomposition), for a million nodes.
  static constexpr std::size_t kWarpNodeLimit = 16384;

  // On the GPU a tile's points are summed by a group of 4, 8, 16 or 32 lanes, the fewest that
  // still give the level kFillThreads threads: the butterfly over the group (12 float64 sums)
  // costs more than the points of a small tile, and at the deep levels most tiles hold a node
  // of a few dozen points. tile_lanes 0: chosen so per level; else that many.
  static constexpr std::uint32_t kMinTileLanes = 4, kMaxTileLanes = 32;
  static constexpr std::size_t kFillThreads = std::size_t{1} << 19;  // an H200 about twice over
  static std::uint32_t lanes_for(std::size_t tiles);

  // Below warp_node_limit, where the nodes hold kGroupLanes / 2 tiles or fewer on average, a warp
  // takes 32 / kGroupLanes nodes (a group of lanes each) instead of one: the nodes' fits
  // (a float64 eigen-decomposition by one lane per node, the kernel's registers) then run in a
  // few warps, not one warp each. A node of more tiles is summed by the whole warp as before, so
  // either form adds in the same order, the same bits. where_few_tiles: so; never or always: the
  // tests' choice.
  static constexpr std::uint32_t kGroupLanes = 4;
  enum class GroupedTotals { where_few_tiles, never, always };

  explicit NodeMoments(std::uint32_t tile_points = default_tile_points(),
                       std::size_t warp_node_limit = kWarpNodeLimit, std::uint32_t tile_lanes = 0,
                       std::size_t small_level_points = default_small_level_points(),
                       GroupedTotals grouped = GroupedTotals::where_few_tiles)
      : tile_points_(tile_points),
        warp_node_limit_(warp_node_limit),
        tile_lanes_(tile_lanes),
        small_level_points_(small_level_points),
        grouped_(grouped) {}

  // The tiles of a level's nodes (starts: nodes + 1 offsets into the m active points).
  void plan(const DeviceVector<std::uint32_t>& starts, std::size_t nodes, std::size_t m);

  // What a pass also computes per node from its sums: the plane fit of the next pass (fit_out:
  // 7 per node; null: none), with band first_band, or with clip the smaller of it and three
  // standard deviations off the plane.
  struct NextFit {
    double* fit = nullptr;
    double first_band = 0;
    bool clip = false;
  };

  // The planned tiles and their partials' buffer, for other passes over them (the octree's
  // octant seeds).
  const DeviceVector<std::uint32_t>& tile_first() const { return tile_first_; }
  const DeviceVector<std::uint32_t>& tile_segment() const { return tile_segment_; }
  std::size_t tile_bound() const { return max_tiles_; }
  std::uint32_t tile_points() const { return plan_tile_points_; }  // the planned level's
  // Whether the planned tiles are long enough that each lane loads its points in batches
  // (TileMoments): not a small level's short tiles.
  bool batched_loads() const { return plan_tile_points_ > kSmallLevelTilePoints; }
  std::uint32_t lanes() const { return lanes_; }
  std::size_t warp_node_limit() const { return warp_node_limit_; }
  // Whether the planned level's totals take kGroupLanes lanes a node (GroupedTotals).
  bool grouped_totals() const;
  DeviceVector<Moments>& partial() { return partial_; }

  // The sums of the planned level's nodes (`sums`: one per node). fit: null for all points.
  void reduce(const DeviceVector<Vec4>& sorted, const DeviceVector<std::uint32_t>& active,
              const DeviceVector<std::uint32_t>& starts, const double* fit, std::uint8_t* inlier,
              DeviceVector<Moments>& sums, const NextFit& next);

 private:
  std::uint32_t tile_points_, plan_tile_points_ = 0;
  std::size_t warp_node_limit_;
  std::uint32_t tile_lanes_, lanes_ = kMaxTileLanes;
  std::size_t small_level_points_;
  GroupedTotals grouped_;
  std::size_t nodes_ = 0, max_tiles_ = 0;
  DeviceVector<std::uint32_t> tile_first_;    // nodes + 1: each node's first tile, then the total
  DeviceVector<std::uint32_t> tile_segment_;  // per tile: its node
  DeviceVector<Moments> partial_;
};

// How many of a node's points (or a tile's) lie within the band of each of its octant seeds'
// candidate planes (seed_plane).
struct SeedCounts {
  std::uint32_t in[kSeedCandidates] = {};
  APRON_HD void merge(const SeedCounts& o) {
    for (int k = 0; k < kSeedCandidates; ++k) in[k] += o.in[k];
  }
};

struct OctreeStats {
  std::vector<std::size_t> nodes;     // per level 1..max_depth: nodes tested
  std::vector<std::size_t> clusters;  // per level: of them clusters
  std::vector<std::size_t> active;    // per level: the points in its nodes (the level's work)
};

// Read access to the sorted Morton keys, whichever width they are stored in: one of the two
// pointers is set, the same for every thread of a launch.
struct KeyView {
  const std::uint32_t* narrow;
  const std::uint64_t* wide;
  APRON_HD std::uint64_t operator[](std::size_t i) const { return narrow ? narrow[i] : wide[i]; }
};

// Builds the clusters of n points (positions in `points`, xyz used). The result: `clusters` in
// order of level, then Morton code; `order` (sorted position -> point index) and
// `sorted_cluster` (per sorted position: its point's cluster or -1; a caller wanting them in the
// input's order scatters them through `order`, random writes that cost about 1 ms at 20M points).
// Scratch buffers are kept for the next call.
class OctreeBuilder {
 public:
  // Up to this many nodes a level's sibling halves take a thread per node, of which each
  // parent's first child works, in one launch; beyond it the parents are numbered first (three
  // launches more) and take a thread each. Below the limit the GPU runs all the threads of that
  // register-heavy kernel at once, so that the idle lanes cost no time.
  static constexpr std::size_t kHalvesPerNodeLimit = 65536;

  // tile_points: NodeMoments' tiles (the tests choose small ones to cut nodes into many);
  // halves_per_node_limit: the tests choose 0 for the parents numbered at every level.
  explicit OctreeBuilder(std::uint32_t tile_points = NodeMoments::default_tile_points(),
                         std::size_t halves_per_node_limit = kHalvesPerNodeLimit)
      : halves_per_node_limit_(halves_per_node_limit), moments_(tile_points) {}

  // How build() puts the points in Morton order: by sorting their keys, or as given, where the
  // caller knows them to be in that order already (a subsequence of an earlier build's `sorted`
  // in the same frame and depth): a stable sort would leave them as they are.
  enum class Order { sort, given };
  void build(const DeviceVector<Vec4>& points, std::size_t n, const OctreeFrame& frame,
             const OctreeParams& params, Order input = Order::sort);
  // The Morton keys of points [begin, end) of the n that the next build() takes, in `frame` to
  // `depth`, computed ahead of it: a caller that uploads the points in chunks gives each chunk
  // its keys while the later chunks are still on their way. Where every point's keys were
  // prepared for the frame and depth that build() is given, it takes them instead of computing
  // them again (the same keys, bit for bit).
  void prepare_keys(const DeviceVector<Vec4>& points, std::size_t n, std::size_t begin,
                    std::size_t end, const OctreeFrame& frame, int depth);

  // On several ranks: sums n doubles of device memory over the ranks, in place (the noise and
  // density estimates of sibling_halves), so that every rank tests halves alike; build then
  // calls it at every level that tests halves. On the device the sum can be queued behind the
  // level's kernels, so the host need not wait for them.
  void set_global_sum(std::function<void(double*, int)> sum) { global_sum_ = std::move(sum); }
  // The levels above first_level (untested: they only drop the nodes of fewer than min_points
  // points, which a tested level drops as well) not run at all: the same clusters, one wait and
  // four launches fewer a level; stats then hold 0 nodes and points for them.
  void skip_untested(bool skip) { skip_untested_ = skip; }
  // Each parent's sibling halves tested by 8 lanes at once (its six halves and coplanar seeds
  // side by side) instead of one thread, at levels of at most kHalvesLanesNodeLimit nodes: there
  // too few parents fill the GPU, and one thread's loads and six float64 eigen-decompositions in
  // turn made the kernel's time; at larger levels the parents fill it, and a thread each costs
  // less (20M points: 0.35 ms less a run). The same groups in the same order; on the CPU bit for
  // bit, on the GPU to the last bits of their sums (the compiler places its FMAs by the code
  // around them). By default on the GPU; the tests choose either.
  static constexpr std::size_t kHalvesLanesNodeLimit = 65536;
  static bool default_halves_by_lanes();
  void halves_by_lanes(bool on) { halves_by_lanes_ = on; }

  DeviceVector<Cluster> clusters;
  DeviceVector<std::uint32_t> order;
  DeviceVector<std::int32_t> sorted_cluster;
  DeviceVector<Vec4> sorted;  // the points in Morton order
  OctreeStats stats;

 private:
  struct LevelSize {
    std::size_t points = 0, nodes = 0;
  };
  LevelSize find_nodes(int level, std::size_t bound);
  void level_pass(int level, const LevelSize& size, const OctreeParams& params);
  template <class Fate, class Clusters>
  void keep_points(const Fate& fate, std::size_t m, const std::uint32_t* group,
                   const Clusters& level_clusters);
  void untested_level(std::size_t m, std::size_t nodes, const OctreeParams& params);
  void merge_sibling_halves(int level, std::size_t nodes, double first_band,
                            const OctreeParams& params);
  void seeded_first_fits(std::size_t nodes, std::size_t m, int shift, double band,
                         const OctreeParams& params);
  void sum_level_noise();
  static bool trims(int level, const OctreeParams& params);
  static bool tests_halves(int level, const OctreeParams& params);
  void reserve_clusters(int level, std::size_t nodes);

  bool keys_prepared(std::size_t n, const OctreeFrame& frame, int depth) const;
  static bool narrow_keys(int depth);
  void size_keys(std::size_t n, int depth);
  std::uint32_t* narrow_keys_out();
  std::uint64_t* wide_keys_out();
  KeyView key_view() const;

  // The points' Morton keys, sorted by build(): in 32 bits where 3 x depth fits (narrow_keys_),
  // else in 64 (keys_); key_depth_ is the depth they were sized for.
  DeviceVector<std::uint32_t> narrow_keys_;
  DeviceVector<std::uint64_t> keys_;
  int key_depth_ = 0;
  // What prepare_keys has covered since the last build: the points, frame and depth it was
  // given and how many points have their keys.
  struct PreparedKeys {
    std::size_t n = 0, done = 0;
    OctreeFrame frame;
    int depth = 0;
  } prepared_;
  DeviceVector<std::uint32_t> active_, active_next_, keep_rank_, segment_, starts_, cluster_flag_,
      cluster_rank_, group_, parent_rank_, first_child_;
  // The level's active points and nodes (find_nodes), the points written by the last level's
  // compaction: the host reads them once per level.
  DeviceVector<std::uint32_t> level_counts_;
  DeviceVector<std::uint8_t> state_, inlier_;
  DeviceVector<double> node_fit_;  // 7 per node: the plane that selects the next pass's points
  DeviceVector<double> noise_terms_, level_noise_, noise_;  // noise_: clusters' sums so far
  DeviceVector<std::uint32_t> noise_bounds_;
  std::function<void(double*, int)> global_sum_;
  std::size_t halves_per_node_limit_;
  DeviceVector<Moments> sums_;
  // The octant seeds' scratch: octants' bounds and sums, the nodes' candidate planes and which
  // are planes, the candidates' counts per tile.
  DeviceVector<std::uint32_t> octant_starts_;
  DeviceVector<Moments> octant_sums_;
  DeviceVector<double> seed_planes_;
  DeviceVector<std::uint32_t> seed_mask_;
  DeviceVector<SeedCounts> seed_partial_;
  NodeMoments moments_;
  OctreeFrame frame_;
  DeviceVector<Cluster> level_clusters_;
  // The clusters as the levels find them, and their running totals on the device ([l]: the
  // clusters of levels 1 to l), read once after the last level; the host's bound on the clusters
  // so far (reserve_clusters).
  DeviceVector<Cluster> cluster_store_;
  DeviceVector<std::uint32_t> cluster_totals_;
  std::size_t clusters_bound_ = 0;
  int depth_ = 0;
  bool skip_untested_ = false;
  bool halves_by_lanes_ = default_halves_by_lanes();
};

}  // namespace apron::planes
