// Octree clustering of 3D-KHT (issue 16, "The method" 1), built level by level instead of by
// recursion: one sort of the points by Morton code at the deepest level; at level l the nodes are
// the runs of equal top-3l-bit prefix among the points still undecided; per node the covariance
// by segmented float64 reductions, its eigen-decomposition and the coplanarity test. Nodes that
// pass are clusters (their points leave), nodes too small are dropped (their points leave), the
// others are split at the next level.
#pragma once

#include <cstddef>
#include <cstdint>
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
  c.node = node;
  c.count = static_cast<std::uint32_t>(m.count);
  c.level = static_cast<std::uint32_t>(level);
  c.begin = begin;
  c.span = span;
  return c;
}

struct OctreeStats {
  std::vector<std::size_t> nodes;     // per level 1..max_depth: nodes tested
  std::vector<std::size_t> clusters;  // per level: of them clusters
};

// Builds the clusters of n points (positions in `points`, xyz used). The result: `clusters` in
// order of level, then Morton code; `order` (sorted position -> point index) and
// `point_cluster` (per point: its cluster or -1). Scratch buffers are kept for the next call.
class OctreeBuilder {
 public:
  void build(const DeviceVector<Vec4>& points, std::size_t n, const OctreeFrame& frame,
             const OctreeParams& params);

  DeviceVector<Cluster> clusters;
  DeviceVector<std::uint32_t> order;
  DeviceVector<std::int32_t> point_cluster;
  DeviceVector<std::int32_t> sorted_cluster;  // the same per sorted position
  DeviceVector<Vec4> sorted;                  // the points in Morton order
  OctreeStats stats;

 private:
  void level_pass(int level, const OctreeParams& params);
  void node_moments(std::size_t m, std::size_t nodes, bool weighted);
  void untested_level(std::size_t m, std::size_t nodes, const OctreeParams& params);

  DeviceVector<std::uint64_t> keys_;
  DeviceVector<std::uint32_t> active_, active_next_, head_, segment_, starts_, cluster_flag_,
      cluster_rank_;
  DeviceVector<std::uint8_t> keep_, state_, inlier_;
  DeviceVector<double> node_fit_;
  DeviceVector<double> values_[10];
  DeviceVector<double> sums_[10];
  OctreeFrame frame_;
  DeviceVector<Cluster> level_clusters_;
  int depth_ = 0;
};

}  // namespace apron::planes
