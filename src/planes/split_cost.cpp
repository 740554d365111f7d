#include "planes/split_cost.hpp"

#include <algorithm>
#include <cmath>

namespace apron::planes {
SplitCost estimate_octree_cost(const std::vector<std::array<double, 3>>& cloud,
                               const std::array<double, 3>& centre, double size,
                               const OctreeParams& params) {
  SplitCost out;
  out.level = std::max(1, std::min({params.first_level + 2, params.max_depth, 6}));
  const int cells_per_axis = 1 << out.level;
  const std::size_t cells = std::size_t{1} << (3 * out.level);
  const double edge = size / cells_per_axis;
  out.point_cell.resize(cloud.size());
  // Per cell: the sums relative to its centre (a double each, as the octree's float64 sums).
  std::vector<Moments> plain(cells);
  auto cell_centre = [&](std::uint32_t c, int d) {
    const int shift = out.level * (2 - d);
    const auto index = static_cast<double>((c >> shift) & (cells_per_axis - 1));
    return -size / 2 + (index + 0.5) * edge;
  };
  auto local = [&](std::size_t i, int d) {
    return static_cast<double>(static_cast<float>(cloud[i][d] - centre[d]));
  };
  for (std::size_t i = 0; i < cloud.size(); ++i) {
    std::uint32_t c = 0;
    for (int d = 0; d < 3; ++d) {
      const double at = std::floor((local(i, d) + size / 2) / size * cells_per_axis);
      const auto index = static_cast<std::uint32_t>(std::clamp(at, 0.0, cells_per_axis - 1.0));
      c = (c << out.level) | index;
    }
    out.point_cell[i] = c;
    plain[c].add(local(i, 0) - cell_centre(c, 0), local(i, 1) - cell_centre(c, 1),
                 local(i, 2) - cell_centre(c, 2));
  }
  // One trimming pass: the points within edge / trim_divisor of each cell's plane.
  const bool trim = params.trim_passes > 0 && params.trim_divisor > 0;
  const double band = trim ? edge / params.trim_divisor : 0;
  std::vector<std::array<double, 4>> plane(cells, {0, 0, 0, 0});  // normal, offset (cell frame)
  for (std::size_t c = 0; c < cells; ++c) {
    if (plain[c].count < params.min_points) continue;
    double mean[3];
    const Eigen3 e = eigen_symmetric(plain[c].covariance(mean));
    for (int d = 0; d < 3; ++d) plane[c][d] = e.vec[d][0];
    plane[c][3] = e.vec[0][0] * mean[0] + e.vec[1][0] * mean[1] + e.vec[2][0] * mean[2];
  }
  std::vector<Moments> inliers(trim ? cells : 0);
  if (trim)
    for (std::size_t i = 0; i < cloud.size(); ++i) {
      const std::uint32_t c = out.point_cell[i];
      if (plain[c].count < params.min_points) continue;
      const double x[3] = {local(i, 0) - cell_centre(c, 0), local(i, 1) - cell_centre(c, 1),
                           local(i, 2) - cell_centre(c, 2)};
      const auto& f = plane[c];
      if (std::fabs(f[0] * x[0] + f[1] * x[1] + f[2] * x[2] - f[3]) <= band)
        inliers[c].add(x[0], x[1], x[2]);
    }
  // Levels 1 .. first_level - 1 are not tested; first_level .. level are.
  const int untested = std::clamp(params.first_level - 1, 0, out.level);
  const double base = kUntestedLevelWork * untested + (out.level - untested);
  out.cell_cost.assign(cells, static_cast<float>(base));
  for (std::size_t c = 0; c < cells; ++c) {
    const Moments& m = trim ? inliers[c] : plain[c];
    if (plain[c].count < params.min_points || m.count < 3) continue;
    double mean[3];
    const Eigen3 e = eigen_symmetric(m.covariance(mean));
    const NodeState state = classify_node(params, out.level, plain[c].count, m.count, e);
    if (state != kSubdivide) continue;
    const double deeper = std::log(plain[c].count / params.min_points) / std::log(4.0);
    const double extra = std::clamp(std::ceil(deeper), 1.0,
                                    static_cast<double>(std::max(1, params.max_depth - out.level)));
    out.cell_cost[c] = static_cast<float>(base + extra);
  }
  return out;
}

}  // namespace apron::planes
