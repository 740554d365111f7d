// The octree's work per point, estimated before the split from one coarse level, so that the
// ranks can be given equal work rather than equal points. A rank's octree work is the points it
// keeps active level after level: points on large planes leave as clusters at coarse levels,
// points on clutter, edges and outliers stay until their nodes grow too small. Per cell of the
// estimate's level (the octree's cells, first_level + 2, at most 6) the node test is run as the
// octree runs it (one trimming pass instead of several): a cell that passes costs its points the
// tested levels down to it; one that fails costs more levels, as many as its points take to fall
// below min_points per node when spread over a surface (a quarter of them per level).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "kernels/planes/plane_math.hpp"

namespace apron::planes {

// A tested level costs the trimming passes' reductions over its active points; an untested one
// (above first_level) only the node heads: a fifth of it, roughly.
inline constexpr double kUntestedLevelWork = 0.2;

struct SplitCost {
  int level = 0;                          // the cells: 2^level per axis of the octree's cube
  std::vector<float> cell_cost;           // per cell: the work of each of its points
  std::vector<std::uint32_t> point_cell;  // per point: its cell
  double of(std::size_t i) const { return cell_cost[point_cell[i]]; }
};

// centre and size: the octree's cube (centred float coordinates, as the octree computes them).
SplitCost estimate_octree_cost(const std::vector<std::array<double, 3>>& cloud,
                               const std::array<double, 3>& centre, double size,
                               const OctreeParams& params);

}  // namespace apron::planes
