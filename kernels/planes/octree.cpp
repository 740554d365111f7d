#include "kernels/planes/octree.hpp"

#include <stdexcept>

#include "kernels/common/primitives.hpp"

namespace apron::planes {
namespace {

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
  std::int32_t* point_cluster;
  APRON_HD void operator()(std::size_t i) const {
    sorted[i] = points[order[i]];
    active[i] = static_cast<std::uint32_t>(i);
    point_cluster[i] = -1;
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

// One of the nine moment terms of an active point, relative to its node's first point.
struct MomentTerm {
  const Vec4* sorted;
  const std::uint32_t* active;
  const std::uint32_t* segment;  // inclusive scan of the heads: node index + 1
  const std::uint32_t* starts;
  int term;  // 0-2: dx dy dz; 3-8: xx xy xz yy yz zz
  double* out;
  APRON_HD void operator()(std::size_t i) const {
    const Vec4 p = sorted[active[i]];
    const Vec4 r = sorted[active[starts[segment[i] - 1]]];
    const double d[3] = {static_cast<double>(p.x) - r.x, static_cast<double>(p.y) - r.y,
                         static_cast<double>(p.z) - r.z};
    constexpr int kPair[6][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 1}, {1, 2}, {2, 2}};
    out[i] = term < 3 ? d[term] : d[kPair[term - 3][0]] * d[kPair[term - 3][1]];
  }
};

struct SumArrays {
  const double* p[9];
};

struct ClassifyNodes {
  const Vec4* sorted;
  const std::uint64_t* keys;
  const std::uint32_t* active;
  const std::uint32_t* starts;  // segments + 1 entries
  SumArrays sums;               // nine arrays of per-node sums
  OctreeParams params;
  int level, shift;
  std::uint8_t* state;
  std::uint32_t* is_cluster;
  Cluster* level_clusters;
  APRON_HD void operator()(std::size_t s) const {
    Moments m;
    m.count = static_cast<double>(starts[s + 1] - starts[s]);
    for (int d = 0; d < 3; ++d) m.s[d] = sums.p[d][s];
    for (int k = 0; k < 6; ++k) m.ss[k] = sums.p[3 + k][s];
    double mean[3];
    const Eigen3 e = eigen_symmetric(m.covariance(mean));
    const NodeState st = classify_node(params, level, m.count, e);
    state[s] = st;
    is_cluster[s] = st == kCluster;
    if (st != kCluster) return;
    const std::uint32_t first = active[starts[s]];
    const Vec4 r = sorted[first];
    const double ref[3] = {r.x, r.y, r.z};
    level_clusters[s] = make_cluster(m, ref, e, keys[first] >> shift, level, first);
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

struct MarkPoints {
  const std::uint32_t* active;
  const std::uint32_t* segment;
  const std::uint8_t* state;
  const std::uint32_t* rank;
  std::uint32_t first_new;
  std::int32_t* sorted_cluster;  // per sorted position
  std::uint8_t* keep;
  APRON_HD void operator()(std::size_t i) const {
    const std::uint32_t s = segment[i] - 1;
    if (state[s] == kCluster) sorted_cluster[active[i]] = static_cast<std::int32_t>(first_new + rank[s]);
    keep[i] = state[s] == kSubdivide;
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
  keys_.resize(n);
  order.resize(n);
  for_each_index(n, MortonKeys{raw(points), frame, depth_, raw(keys_), raw(order)});
  sort_pairs(keys_, order, n, 3 * depth_);
  sorted.resize(n);
  active_.resize(n);
  DeviceVector<std::int32_t>& sorted_cluster = point_cluster;  // per sorted position until the end
  sorted_cluster.resize(n);
  for_each_index(n, GatherSorted{raw(points), raw(order), raw(sorted), raw(active_),
                                 raw(sorted_cluster)});
  clusters.resize(0);
  stats = {};
  for (int level = 1; level <= depth_ && !active_.empty(); ++level) level_pass(level, params);
  // Labels from sorted positions to the points' own order.
  DeviceVector<std::int32_t> labels(n);
  for_each_index(n, ScatterLabels{raw(order), raw(sorted_cluster), raw(labels)});
  point_cluster.swap(labels);
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

  values_.resize(m);
  SumArrays sum_arrays{};
  for (int term = 0; term < 9; ++term) {
    for_each_index(m, MomentTerm{raw(sorted), raw(active_), raw(segment_), raw(starts_), term,
                                 raw(values_)});
    segmented_reduce(values_, starts_, nodes, Reduction::sum, sums_[term]);
    sum_arrays.p[term] = raw(sums_[term]);
  }

  state_.resize(nodes);
  cluster_flag_.resize(nodes);
  level_clusters_.resize(nodes);
  for_each_index(nodes, ClassifyNodes{raw(sorted), raw(keys_), raw(active_), raw(starts_),
                                      sum_arrays, params, level, shift, raw(state_),
                                      raw(cluster_flag_), raw(level_clusters_)});
  cluster_rank_.resize(nodes);
  exclusive_scan(cluster_flag_, nodes, cluster_rank_);
  const std::size_t found = reduce_sum(cluster_flag_, nodes);
  const std::size_t first_new = clusters.size();
  clusters.resize(first_new + found);
  for_each_index(nodes, AppendClusters{raw(state_), raw(cluster_rank_), raw(level_clusters_),
                                       raw(clusters) + first_new});
  keep_.resize(m);
  for_each_index(m, MarkPoints{raw(active_), raw(segment_), raw(state_), raw(cluster_rank_),
                               static_cast<std::uint32_t>(first_new), raw(point_cluster),
                               raw(keep_)});
  compact(active_, keep_, m, active_next_);
  active_.swap(active_next_);
  stats.nodes.push_back(nodes);
  stats.clusters.push_back(found);
}

}  // namespace apron::planes
