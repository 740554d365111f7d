// The split of a cloud over ranks by the octree's work, in time linear in the points. The cloud is
// binned once on the octree's cells of one coarse level (the grid): per cell its points, their box
// and their estimated octree work. Recursive coordinate bisection then runs on the grid's cells
// alone (a few thousand), and each point takes its cell's rank.
//
// The estimate: a rank's octree work is the points it keeps active level after level: points on
// large planes leave as clusters at coarse levels, points on clutter, edges and outliers stay
// until their nodes grow too small. The node test is run as the octree runs it (one trimming
// pass instead of several) on the cells of each tested level down to the estimate's (first_level
// + 2, at most 6): a point costs the levels down to the first where its node passes (or is
// dropped); where none passes, as many more as its points take to fall below min_points per node
// when spread over a surface (a quarter of them per level). Without the coarser levels the walls
// and floors, which leave at first_level, were charged as much as a staircase's clutter.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "io/mesh_reader.hpp"
#include "kernels/planes/plane_math.hpp"

namespace apron::planes {

// A tested level costs the trimming passes' reductions over its active points; an untested one
// (above first_level) only the node heads: a fifth of it, roughly.
inline constexpr double kUntestedLevelWork = 0.2;

using Cloud = io::Points;
using Labels = UninitialisedVector<std::int32_t>;  // per point: its true plane, or -1

struct SplitGrid {
  int level = 0;       // cells: 2^level per axis of the octree's cube, x slowest
  int cost_level = 0;  // the estimate's cells (coarser or the same)
  int cut_level = 0;   // cuts lie on faces of this level's cells (the octree's first_level + 1)
  std::array<double, 3> centre{};
  double size = 1;                         // the octree's cube (centred float coordinates)
  std::vector<std::uint32_t> count;        // per cell: its points
  std::vector<double> cost;                // per cell: its points' estimated work, summed
  std::vector<std::array<double, 6>> box;  // per cell: its points' lo and hi (cloud units)
  // per point: its cell
  UninitialisedVector<std::uint32_t> point_cell;
  std::uint32_t cell_of(const std::array<double, 3>& p) const;
  int index(std::uint32_t cell, int axis) const {  // the cell's index along an axis
    return static_cast<int>((cell >> (level * (2 - axis))) & ((1u << level) - 1));
  }
};

// The grid of the octree's cube (centre and size as the octree computes them), with the estimate
// of each cell's work. The sums are in chunks fixed by the cloud's size, added in order: every
// rank, with any thread count, gets the same grid.
SplitGrid bin_cloud(const Cloud& cloud, const std::array<double, 3>& centre, double size,
                    const OctreeParams& params);

// Recursive coordinate bisection of the grid's points over `ranks` (every rank computes the same
// split): each cut across the longest side of its points' box, on a face of the grid's cut
// level. By count: the face after the median point's cell (this may cut a coarsest tested node).
// With by_cost: over the three axes, the face of the coarsest tested level's cells (none of them
// cut) where the two sides' estimated work comes nearest to the ranks' shares; by count where no
// such face exists. Returns the owner of every cell.
std::vector<int> rcb_cells(const SplitGrid& grid, int ranks, bool by_cost);

}  // namespace apron::planes
