#include "decomposition/partition.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace apron {

Partition::Partition(const Box& domain, std::vector<Box> subdomains)
    : domain_(domain), boxes_(std::move(subdomains)), ownership_(boxes_) {
  constexpr double kFar = std::numeric_limits<double>::max();
  for (auto& b : ownership_)
    for (int d = 0; d < 3; ++d) {
      if (b.lo[d] <= domain.lo[d]) b.lo[d] = -kFar;
      if (b.hi[d] >= domain.hi[d]) b.hi[d] = kFar;
    }
}

std::array<int, 3> process_grid(int ranks, const std::array<double, 3>& extents) {
  std::array<int, 3> best{ranks, 1, 1};
  double best_area = std::numeric_limits<double>::max();
  for (int nx = 1; nx <= ranks; ++nx) {
    if (ranks % nx) continue;
    for (int ny = 1; ny <= ranks / nx; ++ny) {
      if ((ranks / nx) % ny) continue;
      const int nz = ranks / nx / ny;
      const double area = (nx - 1) * extents[1] * extents[2] + (ny - 1) * extents[0] * extents[2] +
                          (nz - 1) * extents[0] * extents[1];
      if (area < best_area - 1e-12 * area) best_area = area, best = {nx, ny, nz};
    }
  }
  return best;
}

Partition Partition::cartesian(const Box& domain, int ranks, std::array<int, 3> dims) {
  if (dims[0] * dims[1] * dims[2] == 0)
    dims = process_grid(ranks, {domain.extent(0), domain.extent(1), domain.extent(2)});
  if (dims[0] * dims[1] * dims[2] != ranks)
    throw std::invalid_argument("process grid " + std::to_string(dims[0]) + "x" +
                                std::to_string(dims[1]) + "x" + std::to_string(dims[2]) +
                                " does not match " + std::to_string(ranks) + " ranks");
  std::vector<Box> boxes;
  // Rank order: x fastest, as MPI_Cart_create with row-major reversed; any fixed order works.
  for (int k = 0; k < dims[2]; ++k)
    for (int j = 0; j < dims[1]; ++j)
      for (int i = 0; i < dims[0]; ++i) {
        Box b;
        const int idx[3] = {i, j, k};
        for (int d = 0; d < 3; ++d) {
          b.lo[d] = domain.lo[d] + domain.extent(d) * idx[d] / dims[d];
          b.hi[d] = idx[d] + 1 == dims[d]
                        ? domain.hi[d]
                        : domain.lo[d] + domain.extent(d) * (idx[d] + 1) / dims[d];
        }
        boxes.push_back(b);
      }
  return Partition(domain, std::move(boxes));
}

namespace {

// One pending RCB node: a box and the contiguous rank range it is split over.
struct RcbNode {
  Box box;
  int first_rank;
  int ranks;
};

// Where a node is cut: along `axis`, with its histogram spanning [lo, lo + extent).
struct RcbAxis {
  int axis = 0;
  double lo = 0, extent = 1;

  int bin_of(const Vec4& p, int bins) const {
    const double f = ((&p.x)[axis] - lo) / extent;
    return std::clamp(static_cast<int>(f * bins), 0, bins - 1);
  }
};

// The longest of three extents, taken in x, y, z order: an axis must be more than 1% longer than
// the best so far to win, so that round-off in lattice positions cannot decide between two equal
// sides.
int longest_axis(const double (&extent)[3]) {
  int axis = 0;
  for (int d = 1; d < 3; ++d)
    if (extent[d] > 1.01 * extent[axis]) axis = d;
  return axis;
}

// Each node is cut across the longest side of the bounding box of its points (all ranks'), not
// of its box: the cut then crosses the particles where they are thinnest, which gives the
// smallest halo. A dam-break column in a long tank is cut across its width instead of across
// the tank's length (half the halo, and both halves see the same walls). Nodes without points
// fall back to their box.
std::vector<RcbAxis> cut_axes(const std::vector<RcbNode>& nodes, const std::vector<int>& node_of,
                              std::span<const Vec4> points, MPI_Comm comm) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const std::size_t count = nodes.size();
  std::vector<double> lo(3 * count, kInf), minus_hi(3 * count, kInf);  // -max = min of -x
  for (std::size_t i = 0; i < points.size(); ++i)
    for (int d = 0; d < 3; ++d) {
      const double x = (&points[i].x)[d];
      lo[3 * node_of[i] + d] = std::min(lo[3 * node_of[i] + d], x);
      minus_hi[3 * node_of[i] + d] = std::min(minus_hi[3 * node_of[i] + d], -x);
    }
  lo.insert(lo.end(), minus_hi.begin(), minus_hi.end());
  MPI_Allreduce(MPI_IN_PLACE, lo.data(), static_cast<int>(lo.size()), MPI_DOUBLE, MPI_MIN, comm);

  std::vector<RcbAxis> axes(count);
  for (std::size_t n = 0; n < count; ++n) {
    double extent[3], first[3];
    bool spread = false;
    for (int d = 0; d < 3; ++d) {
      first[d] = lo[3 * n + d];
      extent[d] = -lo[3 * (count + n) + d] - first[d];
      spread |= extent[d] > 0;  // false: no points (extents -inf) or all in one spot
    }
    if (!spread)
      for (int d = 0; d < 3; ++d) first[d] = nodes[n].box.lo[d], extent[d] = nodes[n].box.extent(d);
    const int axis = longest_axis(extent);
    // Widened by a hair so that the highest point falls in the last bin, not past it.
    axes[n] = {axis, first[axis], extent[axis] * (1 + 1e-9) + 1e-300};
  }
  return axes;
}

}  // namespace

Partition Partition::rcb(const Box& domain, MPI_Comm comm, std::span<const Vec4> points) {
  return rcb(domain, comm, points, std::span<const double>{});
}

// Empty weights: every point weighs 1 (histogram sums of ones are exact in double, so the cuts
// are those of a count histogram).
Partition Partition::rcb(const Box& domain, MPI_Comm comm, std::span<const Vec4> points,
                         std::span<const double> weights) {
  if (!weights.empty() && weights.size() != points.size())
    throw std::invalid_argument("Partition::rcb: one weight per point");
  int nranks = 1;
  MPI_Comm_size(comm, &nranks);
  constexpr int kBins = 4096;
  std::vector<RcbNode> nodes{{domain, 0, nranks}};
  std::vector<int> node_of(points.size(), 0);  // the node each local point currently falls in

  // Split all nodes with more than one rank, level by level, each cut placed where the cumulative
  // global count reaches the left child's share of ranks (histograms summed over ranks).
  while (std::any_of(nodes.begin(), nodes.end(), [](const RcbNode& n) { return n.ranks > 1; })) {
    const std::size_t count = nodes.size();
    const std::vector<RcbAxis> axes = cut_axes(nodes, node_of, points, comm);
    std::vector<double> hist(count * kBins, 0);
    for (std::size_t i = 0; i < points.size(); ++i)
      hist[node_of[i] * kBins + axes[node_of[i]].bin_of(points[i], kBins)] +=
          weights.empty() ? 1.0 : weights[i];
    MPI_Allreduce(MPI_IN_PLACE, hist.data(), static_cast<int>(hist.size()), MPI_DOUBLE, MPI_SUM,
                  comm);

    std::vector<RcbNode> next;
    std::vector<int> left_child(count), cut_bin(count, kBins);
    for (std::size_t n = 0; n < count; ++n) {
      const RcbNode& node = nodes[n];
      left_child[n] = static_cast<int>(next.size());
      if (node.ranks == 1) {
        next.push_back(node);
        continue;
      }
      const int left_ranks = node.ranks / 2;
      double total = 0;
      for (int b = 0; b < kBins; ++b) total += hist[n * kBins + b];
      const double target = total * left_ranks / node.ranks;
      double cumulative = 0;
      int cut = kBins / 2;  // an empty node is split in the middle
      if (total > 0)
        for (cut = 1; cut < kBins; ++cut) {
          cumulative += hist[n * kBins + cut - 1];
          if (cumulative >= target) break;
        }
      cut_bin[n] = cut;
      const RcbAxis& a = axes[n];
      const double at =
          std::clamp(a.lo + a.extent * cut / kBins, node.box.lo[a.axis], node.box.hi[a.axis]);
      RcbNode left = node, right = node;
      left.box.hi[a.axis] = right.box.lo[a.axis] = at;
      left.ranks = left_ranks;
      right.first_rank = node.first_rank + left_ranks;
      right.ranks = node.ranks - left_ranks;
      next.push_back(left);
      next.push_back(right);
    }
    for (std::size_t i = 0; i < points.size(); ++i) {
      const int n = node_of[i];
      const bool right = nodes[n].ranks > 1 && axes[n].bin_of(points[i], kBins) >= cut_bin[n];
      node_of[i] = left_child[n] + (right ? 1 : 0);
    }
    nodes = std::move(next);
  }
  std::vector<Box> boxes(nranks);
  for (const auto& n : nodes) boxes[n.first_rank] = n.box;
  return Partition(domain, std::move(boxes));
}

std::vector<int> Partition::neighbours(int rank, double halo) const {
  // One expression per pair, whichever of the two asks: rounding then cannot make the relation
  // one-sided (a rank waiting for a peer that does not list it would wait forever).
  std::vector<int> result;
  for (int r = 0; r < ranks(); ++r) {
    const int low = std::min(rank, r), high = std::max(rank, r);
    if (r != rank && boxes_[low].expanded(halo).intersects(boxes_[high])) result.push_back(r);
  }
  return result;
}

}  // namespace apron
