#include "kernels/planes/octree.hpp"

#include <stdexcept>

#include "kernels/common/primitives.hpp"

namespace apron::planes {
namespace {

constexpr int kTerms = 10;  // count, dx dy dz, xx xy xz yy yz zz
constexpr int kFit = 7;     // normal, mean, band

struct MortonKeys {
  const Vec4* points;
  OctreeFrame frame;
  int depth;
  std::uint64_t* keys;
  std::uint32_t* index;
  APRON_HD void operator()(std::size_t i) const {
    const Vec4 p = points[i];
    keys[i] = morton_code(p.x, p.y, p.z, frame.origin, frame.size, depth);
    index[i] = static_cast<std::uint32_t>(i);
  }
};

struct GatherSorted {
  const Vec4* points;
  const std::uint32_t* order;
  Vec4* sorted;
  std::uint32_t* active;
  std::int32_t* sorted_cluster;
  APRON_HD void operator()(std::size_t i) const {
    sorted[i] = points[order[i]];
    active[i] = static_cast<std::uint32_t>(i);
    sorted_cluster[i] = -1;
  }
};

// 1 where an active point starts a new node (its prefix differs from the previous one's).
struct NodeHeads {
  const std::uint64_t* keys;
  const std::uint32_t* active;
  int shift;
  std::uint32_t* head;
  APRON_HD void operator()(std::size_t i) const {
    head[i] = i == 0 || (keys[active[i]] >> shift) != (keys[active[i - 1]] >> shift);
  }
};

struct IsHead {
  const std::uint32_t* head;
  APRON_HD bool operator()(std::uint32_t i) const { return head[i] != 0; }
};

// A point's offset from its node's reference point (the node's first point), in double.
struct NodePoints {
  const Vec4* sorted;
  const std::uint32_t* active;
  const std::uint32_t* segment;  // inclusive scan of the heads: node index + 1
  const std::uint32_t* starts;
  APRON_HD void offset(std::size_t i, double d[3]) const {
    const Vec4 p = sorted[active[i]];
    const Vec4 r = sorted[active[starts[segment[i] - 1]]];
    d[0] = static_cast<double>(p.x) - r.x;
    d[1] = static_cast<double>(p.y) - r.y;
    d[2] = static_cast<double>(p.z) - r.z;
  }
};

struct TermArrays {
  double* p[kTerms];
};

// The ten moment terms of an active point (zero when it is not an inlier), one launch for all.
struct MomentTerms {
  NodePoints nodes;
  const std::uint8_t* inlier;  // null: every point counts
  TermArrays out;
  APRON_HD void operator()(std::size_t i) const {
    if (inlier != nullptr && inlier[i] == 0) {
      for (int t = 0; t < kTerms; ++t) out.p[t][i] = 0;
      return;
    }
    double d[3];
    nodes.offset(i, d);
    out.p[0][i] = 1;
    for (int a = 0; a < 3; ++a) out.p[1 + a][i] = d[a];
    constexpr int kPair[6][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 1}, {1, 2}, {2, 2}};
    for (int k = 0; k < 6; ++k) out.p[4 + k][i] = d[kPair[k][0]] * d[kPair[k][1]];
  }
};

struct SumArrays {
  const double* p[kTerms];
  APRON_HD Moments at(std::size_t s) const {
    Moments m;
    m.count = p[0][s];
    for (int d = 0; d < 3; ++d) m.s[d] = p[1 + d][s];
    for (int k = 0; k < 6; ++k) m.ss[k] = p[4 + k][s];
    return m;
  }
};

// Per node: the plane of its (current) inliers, as normal and mean relative to the reference,
// and the distance within which points are its inliers in the next pass: the node's edge /
// trim_divisor at first, then at most three standard deviations of the inliers off the plane
// (sigma clipping: a strip of another surface within the first band, the side of a box standing
// on a floor, say, leaves in a pass or two).
struct FitNodes {
  SumArrays sums;
  double first_band;
  bool clip;
  double* fit;  // 7 per node
  APRON_HD void operator()(std::size_t s) const {
    const Moments m = sums.at(s);
    double* f = fit + kFit * s;
    if (m.count < 3) {  // too few to fit: a plane no point is near
      for (int k = 0; k < kFit; ++k) f[k] = k == 0 ? 1.0 : (k < 3 ? 0.0 : 1e300);
      f[6] = 0;
      return;
    }
    double mean[3];
    const Eigen3 e = eigen_symmetric(m.covariance(mean));
    for (int d = 0; d < 3; ++d) f[d] = e.vec[d][0], f[3 + d] = mean[d];
    const double spread = 3 * std::sqrt(e.value[0] > 0 ? e.value[0] : 0);
    f[6] = clip && spread < first_band ? spread : first_band;
  }
};

// Inlier of its node's plane: within the node's edge / trim_divisor.
struct TrimPoints {
  NodePoints nodes;
  const double* fit;
  std::uint8_t* inlier;
  APRON_HD void operator()(std::size_t i) const {
    double d[3];
    nodes.offset(i, d);
    const double* f = fit + kFit * (nodes.segment[i] - 1);
    const double distance = f[6];
    const double along = f[0] * (d[0] - f[3]) + f[1] * (d[1] - f[4]) + f[2] * (d[2] - f[5]);
    inlier[i] = (along <= distance && along >= -distance) ? 1 : 0;
  }
};

struct ClassifyNodes {
  const Vec4* sorted;
  const std::uint64_t* keys;
  const std::uint32_t* active;
  const std::uint32_t* starts;  // segments + 1 entries
  SumArrays sums;               // of the node's inliers
  OctreeParams params;
  int level, shift;
  std::uint8_t* state;
  std::uint32_t* is_cluster;
  Cluster* level_clusters;
  APRON_HD void operator()(std::size_t s) const {
    const Moments m = sums.at(s);
    const double count = static_cast<double>(starts[s + 1] - starts[s]);
    Eigen3 e{};
    double mean[3];
    if (m.count >= 3) e = eigen_symmetric(m.covariance(mean));
    const NodeState st = classify_node(params, level, count, m.count, e);
    state[s] = st;
    is_cluster[s] = st == kCluster;
    if (st != kCluster) return;
    const std::uint32_t first = active[starts[s]];
    const Vec4 r = sorted[first];
    const double ref[3] = {r.x, r.y, r.z};
    // The node's points lie in its run of the Morton order (among points of earlier
    // clusters whose trimmed points stayed active): [first, last].
    const std::uint32_t last = active[starts[s + 1] - 1];
    level_clusters[s] =
        make_cluster(m, ref, e, keys[first] >> shift, level, first, last - first + 1);
  }
};

struct AppendClusters {
  const std::uint8_t* state;
  const std::uint32_t* rank;
  const Cluster* level_clusters;
  Cluster* clusters;  // from the first new one
  APRON_HD void operator()(std::size_t s) const {
    if (state[s] == kCluster) clusters[rank[s]] = level_clusters[s];
  }
};

// A cluster's inliers join it; a dropped node's points leave for good; a subdivided node's points
// and a cluster's trimmed points (another plane's points in its corner, say) stay active, to be
// tested in the nodes of the next level.
struct MarkPoints {
  const std::uint32_t* active;
  const std::uint32_t* segment;
  const std::uint8_t* state;
  const std::uint32_t* rank;
  const std::uint8_t* inlier;  // null: all
  std::uint32_t first_new;
  bool deepest;
  std::int32_t* sorted_cluster;
  std::uint8_t* keep;
  APRON_HD void operator()(std::size_t i) const {
    const std::uint32_t s = segment[i] - 1;
    const bool joins = state[s] == kCluster && (inlier == nullptr || inlier[i] != 0);
    if (joins) sorted_cluster[active[i]] = static_cast<std::int32_t>(first_new + rank[s]);
    keep[i] = state[s] == kSubdivide || (state[s] == kCluster && !joins && !deepest);
  }
};

// A level above first_level: nodes with enough points are split, the others dropped.
struct SplitOrDrop {
  const std::uint32_t* segment;
  const std::uint32_t* starts;
  int min_points;
  std::uint8_t* keep;
  APRON_HD void operator()(std::size_t i) const {
    const std::uint32_t s = segment[i] - 1;
    keep[i] = starts[s + 1] - starts[s] >= static_cast<std::uint32_t>(min_points);
  }
};

struct ScatterLabels {
  const std::uint32_t* order;
  const std::int32_t* sorted_cluster;
  std::int32_t* point_cluster;
  APRON_HD void operator()(std::size_t i) const { point_cluster[order[i]] = sorted_cluster[i]; }
};

}  // namespace

void OctreeBuilder::build(const DeviceVector<Vec4>& points, std::size_t n, const OctreeFrame& frame,
                          const OctreeParams& params) {
  if (params.max_depth < 1 || params.max_depth > 21)
    throw std::invalid_argument("octree depth must be between 1 and 21");
  if (n >= (std::size_t{1} << 32) - 1)
    throw std::invalid_argument("octree: more than 2^32 - 2 points on one rank");
  depth_ = params.max_depth;
  frame_ = frame;
  keys_.resize(n);
  order.resize(n);
  for_each_index(n, MortonKeys{raw(points), frame, depth_, raw(keys_), raw(order)});
  sort_pairs(keys_, order, n, 3 * depth_);
  sorted.resize(n);
  active_.resize(n);
  sorted_cluster.resize(n);
  for_each_index(
      n, GatherSorted{raw(points), raw(order), raw(sorted), raw(active_), raw(sorted_cluster)});
  clusters.resize(0);
  stats = {};
  for (int level = 1; level <= depth_ && !active_.empty(); ++level) level_pass(level, params);
  point_cluster.resize(n);
  for_each_index(n, ScatterLabels{raw(order), raw(sorted_cluster), raw(point_cluster)});
}

// The ten moment sums of every node (of its inliers when weighted).
void OctreeBuilder::node_moments(std::size_t m, std::size_t nodes, bool weighted) {
  TermArrays terms{};
  for (int term = 0; term < kTerms; ++term) {
    values_[term].resize(m);
    terms.p[term] = raw(values_[term]);
  }
  const NodePoints np{raw(sorted), raw(active_), raw(segment_), raw(starts_)};
  for_each_index(m, MomentTerms{np, weighted ? raw(inlier_) : nullptr, terms});
  for (int term = 0; term < kTerms; ++term)
    segmented_reduce(values_[term], starts_, nodes, Reduction::sum, sums_[term]);
}

void OctreeBuilder::level_pass(int level, const OctreeParams& params) {
  const std::size_t m = active_.size();
  const int shift = 3 * (depth_ - level);
  head_.resize(m);
  for_each_index(m, NodeHeads{raw(keys_), raw(active_), shift, raw(head_)});
  segment_.resize(m);
  inclusive_scan(head_, m, segment_);
  const std::size_t nodes = select_indices_if(m, IsHead{raw(head_)}, starts_);
  starts_.resize(nodes + 1);
  starts_[nodes] = static_cast<std::uint32_t>(m);

  if (level < params.first_level) {  // untested: only the node sizes matter
    untested_level(m, nodes, params);
    return;
  }
  node_moments(m, nodes, false);
  SumArrays sums{};  // after the first node_moments: it sizes the arrays
  for (int term = 0; term < kTerms; ++term) sums.p[term] = raw(sums_[term]);
  const bool trim =
      params.trim_passes > 0 && params.trim_divisor > 0 && level >= params.first_level;
  if (trim) {
    const double edge = frame_.size / static_cast<double>(std::uint64_t{1} << level);
    const NodePoints np{raw(sorted), raw(active_), raw(segment_), raw(starts_)};
    node_fit_.resize(kFit * nodes);
    inlier_.resize(m);
    for (int pass = 0; pass < params.trim_passes; ++pass) {
      for_each_index(nodes, FitNodes{sums, edge / params.trim_divisor, pass > 0, raw(node_fit_)});
      for_each_index(m, TrimPoints{np, raw(node_fit_), raw(inlier_)});
      node_moments(m, nodes, true);
    }
  }

  state_.resize(nodes);
  cluster_flag_.resize(nodes);
  level_clusters_.resize(nodes);
  for_each_index(
      nodes, ClassifyNodes{raw(sorted), raw(keys_), raw(active_), raw(starts_), sums, params, level,
                           shift, raw(state_), raw(cluster_flag_), raw(level_clusters_)});
  cluster_rank_.resize(nodes);
  exclusive_scan(cluster_flag_, nodes, cluster_rank_);
  const std::size_t found = reduce_sum(cluster_flag_, nodes);
  const std::size_t first_new = clusters.size();
  clusters.resize(first_new + found);
  for_each_index(nodes, AppendClusters{raw(state_), raw(cluster_rank_), raw(level_clusters_),
                                       raw(clusters) + first_new});
  keep_.resize(m);
  for_each_index(m, MarkPoints{raw(active_), raw(segment_), raw(state_), raw(cluster_rank_),
                               trim ? raw(inlier_) : nullptr, static_cast<std::uint32_t>(first_new),
                               level >= depth_, raw(sorted_cluster), raw(keep_)});
  compact(active_, keep_, m, active_next_);
  active_.swap(active_next_);
  stats.nodes.push_back(nodes);
  stats.clusters.push_back(found);
}

void OctreeBuilder::untested_level(std::size_t m, std::size_t nodes, const OctreeParams& params) {
  keep_.resize(m);
  for_each_index(m, SplitOrDrop{raw(segment_), raw(starts_), params.min_points, raw(keep_)});
  compact(active_, keep_, m, active_next_);
  active_.swap(active_next_);
  stats.nodes.push_back(nodes);
  stats.clusters.push_back(0);
}

}  // namespace apron::planes
