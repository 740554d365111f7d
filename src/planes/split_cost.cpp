#include "planes/split_cost.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace apron::planes {

std::uint32_t SplitGrid::cell_of(const std::array<double, 3>& p) const {
  const double cells = static_cast<double>(1u << level);
  std::uint32_t c = 0;
  for (int d = 0; d < 3; ++d) {
    // From the centred float coordinate, as the octree computes its cells.
    const auto local = static_cast<double>(static_cast<float>(p[d] - centre[d]));
    const double at = std::floor((local + size / 2) / size * cells);
    c = (c << level) | static_cast<std::uint32_t>(std::clamp(at, 0.0, cells - 1));
  }
  return c;
}

namespace {

// The cloud's points in a fixed number of consecutive chunks, each summed on its own (in
// parallel) and the chunks' sums then added in order.
struct Chunks {
  std::size_t n, count;
  std::size_t begin(std::size_t k) const { return n * k / count; }
  std::size_t end(std::size_t k) const { return n * (k + 1) / count; }
};

Chunks chunks_for(std::size_t n, std::size_t bytes_per_chunk) {
  constexpr std::size_t kPointsPerChunk = std::size_t{1} << 20, kMaxChunks = 16;
  constexpr std::size_t kScratchBytes = std::size_t{256} << 20;
  const std::size_t by_points = std::clamp<std::size_t>(n / kPointsPerChunk, 1, kMaxChunks);
  return {n, std::min(by_points, std::max<std::size_t>(1, kScratchBytes / bytes_per_chunk))};
}

// The estimate's cells: per grid cell its estimate cell, per estimate cell its centre.
struct CostCells {
  int level;
  double edge;
  std::vector<std::uint32_t> of;              // per grid cell
  std::vector<std::array<double, 3>> centre;  // per estimate cell (centred coordinates)
  CostCells(const SplitGrid& grid, int cost_level)
      : level(cost_level), edge(grid.size / (1 << cost_level)) {
    const int shift = grid.level - level;
    of.resize(grid.count.size());
    for (std::uint32_t h = 0; h < of.size(); ++h) {
      std::uint32_t c = 0;
      for (int d = 0; d < 3; ++d)
        c = (c << level) | static_cast<std::uint32_t>(grid.index(h, d) >> shift);
      of[h] = c;
    }
    centre.resize(std::size_t{1} << (3 * level));
    for (std::uint32_t c = 0; c < centre.size(); ++c)
      for (int d = 0; d < 3; ++d) {
        const auto index = static_cast<double>((c >> (level * (2 - d))) & ((1u << level) - 1));
        centre[c][d] = -grid.size / 2 + (index + 0.5) * edge;
      }
  }
  // The cell holding a finer level's cell c.
  std::uint32_t of_finer(const CostCells& finer, std::uint32_t c) const {
    const int shift = finer.level - level;
    std::uint32_t out = 0;
    for (int d = 0; d < 3; ++d)
      out =
          (out << level) | (((c >> (finer.level * (2 - d))) & ((1u << finer.level) - 1)) >> shift);
    return out;
  }
  // A point relative to its estimate cell's centre (from the centred float coordinates).
  void local(const SplitGrid& grid, const std::array<double, 3>& p, std::uint32_t c,
             double x[3]) const {
    for (int d = 0; d < 3; ++d)
      x[d] = static_cast<double>(static_cast<float>(p[d] - grid.centre[d])) - centre[c][d];
  }
};

// Pass 1: per grid cell its points and their box; per estimate cell the points' sums.
void count_and_sum(const Cloud& cloud, SplitGrid& grid, const CostCells& cost_cells,
                   std::uint32_t* point_cell, std::vector<Moments>& plain) {
  const std::size_t cells = grid.count.size(), cost_cells_n = plain.size();
  const Chunks chunks =
      chunks_for(cloud.size(), cells * (sizeof(std::uint32_t) + sizeof(std::array<double, 6>)) +
                                   cost_cells_n * sizeof(Moments));
  constexpr std::array<double, 6> kEmpty = {1e300, 1e300, 1e300, -1e300, -1e300, -1e300};
  std::vector<std::vector<std::uint32_t>> count(chunks.count);
  std::vector<std::vector<std::array<double, 6>>> box(chunks.count);
  std::vector<std::vector<Moments>> sums(chunks.count);
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t k = 0; k < static_cast<std::int64_t>(chunks.count); ++k) {
    auto& my_count = count[k];
    auto& my_box = box[k];
    auto& my_sums = sums[k];
    my_count.assign(cells, 0);
    my_box.assign(cells, kEmpty);
    my_sums.assign(cost_cells_n, Moments{});
    for (std::size_t i = chunks.begin(k); i < chunks.end(k); ++i) {
      const auto& p = cloud[i];
      const std::uint32_t h = grid.cell_of(p), c = cost_cells.of[h];
      point_cell[i] = h;
      ++my_count[h];
      for (int d = 0; d < 3; ++d)
        my_box[h][d] = std::min(my_box[h][d], p[d]),
        my_box[h][3 + d] = std::max(my_box[h][3 + d], p[d]);
      double x[3];
      cost_cells.local(grid, p, c, x);
      my_sums[c].add(x[0], x[1], x[2]);
    }
  }
  grid.box.assign(cells, kEmpty);
  for (std::size_t k = 0; k < chunks.count; ++k) {
    for (std::size_t h = 0; h < cells; ++h) {
      grid.count[h] += count[k][h];
      for (int d = 0; d < 3; ++d)
        grid.box[h][d] = std::min(grid.box[h][d], box[k][h][d]),
        grid.box[h][3 + d] = std::max(grid.box[h][3 + d], box[k][h][3 + d]);
    }
    for (std::size_t c = 0; c < cost_cells_n; ++c) plain[c].merge(sums[k][c]);
  }
}

// The sums of a point set moved to another reference point: delta = old reference - new one.
Moments moved(const Moments& m, const double delta[3]) {
  Moments out = m;
  const int ij[6][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 1}, {1, 2}, {2, 2}};
  for (int k = 0; k < 6; ++k) {
    const int i = ij[k][0], j = ij[k][1];
    out.ss[k] += delta[i] * m.s[j] + delta[j] * m.s[i] + m.count * delta[i] * delta[j];
  }
  for (int d = 0; d < 3; ++d) out.s[d] += m.count * delta[d];
  return out;
}

// The plain sums of a coarser level's cells from the estimate cells' sums.
std::vector<Moments> coarser_sums(const CostCells& fine, const CostCells& coarse,
                                  const std::vector<Moments>& plain) {
  std::vector<Moments> out(coarse.centre.size());
  for (std::uint32_t c = 0; c < plain.size(); ++c) {
    if (plain[c].count == 0) continue;
    const std::uint32_t parent = coarse.of_finer(fine, c);
    double delta[3];
    for (int d = 0; d < 3; ++d) delta[d] = fine.centre[c][d] - coarse.centre[parent][d];
    out[parent].merge(moved(plain[c], delta));
  }
  return out;
}

// One tested level of the estimate: its cells, their plain sums and the plane of each.
struct EstimateLevel {
  CostCells cells;
  std::vector<Moments> plain, inliers;
  std::vector<std::array<double, 4>> plane;  // normal, offset (cell frame)
  double band = 0;
  std::uint32_t stride = 1;  // the trimming pass takes every stride-th point
};

void fit_planes(EstimateLevel& l, int min_points) {
  l.plane.assign(l.plain.size(), {0, 0, 0, 0});
  for (std::size_t c = 0; c < l.plain.size(); ++c) {
    if (l.plain[c].count < min_points) continue;
    double mean[3];
    const Eigen3 e = eigen_symmetric(l.plain[c].covariance(mean));
    for (int d = 0; d < 3; ++d) l.plane[c][d] = e.vec[d][0];
    l.plane[c][3] = e.vec[0][0] * mean[0] + e.vec[1][0] * mean[1] + e.vec[2][0] * mean[2];
  }
}

// Pass 2 (one trimming pass per level): per cell the sums of the points within its band of
// the plane of its plain sums.
void trimmed_sums(const Cloud& cloud, const SplitGrid& grid, std::vector<EstimateLevel>& levels,
                  int min_points) {
  std::size_t bytes = 0;
  for (const auto& l : levels) bytes += l.plain.size() * sizeof(Moments);
  const Chunks chunks = chunks_for(cloud.size(), bytes);
  std::vector<std::vector<std::vector<Moments>>> sums(chunks.count);
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t k = 0; k < static_cast<std::int64_t>(chunks.count); ++k) {
    auto& my_sums = sums[k];
    // Level by level, each over its sample of the chunk: no test of every point for every level.
    for (const auto& l : levels) {
      auto& level_sums = my_sums.emplace_back(l.plain.size());
      const std::size_t first = (chunks.begin(k) + l.stride - 1) / l.stride * l.stride;
      for (std::size_t i = first; i < chunks.end(k); i += l.stride) {
        const std::uint32_t c = l.cells.of[grid.point_cell[i]];
        if (l.plain[c].count < min_points) continue;
        double x[3];
        l.cells.local(grid, cloud[i], c, x);
        const auto& f = l.plane[c];
        if (std::fabs(f[0] * x[0] + f[1] * x[1] + f[2] * x[2] - f[3]) <= l.band)
          level_sums[c].add(x[0], x[1], x[2]);
      }
    }
  }
  for (std::size_t t = 0; t < levels.size(); ++t) {
    levels[t].inliers.assign(levels[t].plain.size(), Moments{});
    for (std::size_t k = 0; k < chunks.count; ++k)
      for (std::size_t c = 0; c < levels[t].plain.size(); ++c)
        levels[t].inliers[c].merge(sums[k][t][c]);
  }
}

// The node test of a level's cell on its sums (trimmed ones scaled by the level's stride).
NodeState test_cell(const EstimateLevel& l, std::size_t c, int level, bool trim,
                    const OctreeParams& params) {
  const Moments& m = trim ? l.inliers[c] : l.plain[c];
  if (l.plain[c].count < params.min_points) return kDrop;
  if (m.count < 3) return kSubdivide;
  double mean[3];
  const Eigen3 e = eigen_symmetric(m.covariance(mean));
  return classify_node(params, level, l.plain[c].count, m.count * (trim ? l.stride : 1), e);
}

// The work of each point of an estimate cell: the levels down to the first where its node
// passes the test (or is dropped); past the estimate's level, as many more as its points take to
// fall below min_points per node when spread over a surface (a quarter of them per level).
std::vector<double> work_per_point(const std::vector<EstimateLevel>& levels, int first_tested,
                                   bool trim, const OctreeParams& params) {
  const EstimateLevel& finest = levels.back();
  const int level = finest.cells.level;
  const int untested = std::clamp(params.first_level - 1, 0, level);
  auto down_to = [&](int l) { return kUntestedLevelWork * untested + (l - untested); };
  std::vector<double> work(finest.plain.size(), down_to(level));
  for (std::uint32_t c = 0; c < finest.plain.size(); ++c) {
    if (finest.plain[c].count == 0) continue;
    bool decided = false;
    for (std::size_t t = 0; t + 1 < levels.size() && !decided; ++t) {
      const int l = first_tested + static_cast<int>(t);
      const std::uint32_t ancestor = levels[t].cells.of_finer(finest.cells, c);
      if (test_cell(levels[t], ancestor, l, trim, params) != kSubdivide)
        work[c] = down_to(l), decided = true;
    }
    if (decided || test_cell(finest, c, level, trim, params) != kSubdivide) continue;
    const double deeper = std::log(finest.plain[c].count / params.min_points) / std::log(4.0);
    const double extra = std::clamp(std::ceil(deeper), 1.0,
                                    static_cast<double>(std::max(1, params.max_depth - level)));
    work[c] += extra;
  }
  return work;
}

}  // namespace

SplitGrid bin_cloud(const Cloud& cloud, const std::array<double, 3>& centre, double size,
                    const OctreeParams& params) {
  constexpr int kFinestGrid = 6;  // 262,144 cells
  SplitGrid grid;
  grid.cost_level = std::max(1, std::min({params.first_level + 2, params.max_depth, kFinestGrid}));
  const int cut_level = std::max(1, std::min(params.first_level + 1, params.max_depth));
  grid.level = std::min(kFinestGrid, std::max(grid.cost_level, cut_level));
  // Coarser faces are faces of the finer level's cells too: no tested node is cut.
  grid.cut_level = std::min(cut_level, grid.level);
  grid.centre = centre;
  grid.size = size;
  const std::size_t cells = std::size_t{1} << (3 * grid.level);
  grid.count.assign(cells, 0);
  // Tested levels down to the estimate's: the finest from every point, the coarser ones' planes
  // from its sums, their trimming pass from a sample (their cells hold hundreds of points).
  constexpr std::uint32_t kCoarseStride = 8;
  const int first_tested = std::clamp(params.first_level, 1, grid.cost_level);
  std::vector<EstimateLevel> levels;
  for (int l = first_tested; l <= grid.cost_level; ++l)
    levels.push_back({CostCells(grid, l), {}, {}, {}, 0, l < grid.cost_level ? kCoarseStride : 1});
  EstimateLevel& finest = levels.back();
  finest.plain.resize(finest.cells.centre.size());
  grid.point_cell.resize(cloud.size());
  count_and_sum(cloud, grid, finest.cells, grid.point_cell.data(), finest.plain);
  const bool trim = params.trim_passes > 0 && params.trim_divisor > 0;
  for (auto& l : levels) {
    if (&l != &finest) l.plain = coarser_sums(finest.cells, l.cells, finest.plain);
    l.band = trim ? l.cells.edge / params.trim_divisor : 0;
    fit_planes(l, params.min_points);
  }
  if (trim) trimmed_sums(cloud, grid, levels, params.min_points);
  const std::vector<double> work = work_per_point(levels, first_tested, trim, params);
  grid.cost.resize(cells);
  for (std::uint32_t h = 0; h < cells; ++h) grid.cost[h] = grid.count[h] * work[finest.cells.of[h]];
  return grid;
}

namespace {

// A box of grid cells, [lo, hi) per axis, and the ranks its points go to.
struct Region {
  std::array<int, 3> lo, hi;
  int first, ranks;
};

template <class Visit>
void for_cells(const SplitGrid& grid, const Region& r, Visit visit) {
  for (int x = r.lo[0]; x < r.hi[0]; ++x)
    for (int y = r.lo[1]; y < r.hi[1]; ++y)
      for (int z = r.lo[2]; z < r.hi[2]; ++z)
        visit((static_cast<std::uint32_t>(x) << (2 * grid.level)) |
              (static_cast<std::uint32_t>(y) << grid.level) | static_cast<std::uint32_t>(z));
}

// A region's points per face-to-face slice of the cut level along each axis: points and work.
struct Slices {
  std::array<std::vector<double>, 3> points, work;
  double total_points = 0, total_work = 0;
};

// The face where the work below comes nearest to `share` of the total, and how far from it (a
// fraction of the total; 2 where no face fits). Only every other face: those are also faces of
// the coarsest tested level's cells, so the cut splits no tested node (a node cut in two is
// tested as two halves, and half of a node that fails the test, the envelope of a staircase, can
// pass it: a phantom plane on one rank count and not on another).
struct Cut {
  int face = 0;
  double gap = 2;
};

Cut cost_cut(const std::vector<double>& points, const std::vector<double>& work, double total,
             double share) {
  Cut best;
  std::size_t lowest = 0;
  while (lowest < points.size() && points[lowest] == 0) ++lowest;
  std::size_t past = points.size();
  while (past > lowest && points[past - 1] == 0) --past;
  double below = 0;
  for (std::size_t face = lowest + 1; face < past; ++face) {
    below += work[face - 1];
    const double gap = std::fabs(below - share * total) / total;
    if (face % 2 == 0 && gap < best.gap) best = {static_cast<int>(face), gap};
  }
  return best;
}

// The face after the slice holding the k-th point (from 0) in order along the axis.
int count_cut(const std::vector<double>& points, double k) {
  double below = 0;
  for (std::size_t j = 0; j < points.size(); ++j) {
    below += points[j];
    if (below > k) return static_cast<int>(j) + 1;
  }
  return static_cast<int>(points.size());
}

}  // namespace

std::vector<int> rcb_cells(const SplitGrid& grid, int ranks, bool by_cost) {
  const int per_axis = 1 << grid.level, shift = grid.level - grid.cut_level;
  std::vector<int> owner(grid.count.size(), 0);
  std::vector<Region> pending = {{{0, 0, 0}, {per_axis, per_axis, per_axis}, 0, ranks}};
  while (!pending.empty()) {
    const Region r = pending.back();
    pending.pop_back();
    std::array<double, 6> box = {1e300, 1e300, 1e300, -1e300, -1e300, -1e300};
    Slices s;
    for (int d = 0; d < 3; ++d)
      s.points[d].assign(std::size_t{1} << grid.cut_level, 0.0),
          s.work[d].assign(std::size_t{1} << grid.cut_level, 0.0);
    for_cells(grid, r, [&](std::uint32_t c) {
      if (grid.count[c] == 0) return;
      for (int d = 0; d < 3; ++d) {
        box[d] = std::min(box[d], grid.box[c][d]);
        box[3 + d] = std::max(box[3 + d], grid.box[c][3 + d]);
        const auto slice = static_cast<std::size_t>(grid.index(c, d) >> shift);
        s.points[d][slice] += grid.count[c];
        s.work[d][slice] += grid.cost[c];
      }
      s.total_points += grid.count[c];
      s.total_work += grid.cost[c];
    });
    if (r.ranks == 1 || s.total_points == 0) {
      for_cells(grid, r, [&](std::uint32_t c) { owner[c] = r.first; });
      continue;
    }
    int axis = 0;
    for (int d = 1; d < 3; ++d)
      if (box[3 + d] - box[d] > box[3 + axis] - box[axis]) axis = d;
    const int left = r.ranks / 2;
    Cut cut;
    if (by_cost && s.total_work > 0) {
      // Every axis, the longest first: a grid of four cells per axis fits a share such as a
      // third better across one side than another.
      int best_axis = axis;
      for (int turn = 0; turn < 3; ++turn) {
        const int d = (axis + turn) % 3;
        const Cut c =
            cost_cut(s.points[d], s.work[d], s.total_work, static_cast<double>(left) / r.ranks);
        if (c.gap < cut.gap - 1e-9) cut = c, best_axis = d;
      }
      axis = best_axis;
    }
    if (cut.gap > 1)  // by count, or no face fits
      cut.face = count_cut(s.points[axis], std::floor(s.total_points * left / r.ranks));
    const int at = std::clamp(cut.face << shift, r.lo[axis], r.hi[axis]);
    Region below = r, above = r;
    below.hi[axis] = at, below.ranks = left;
    above.lo[axis] = at, above.first = r.first + left, above.ranks = r.ranks - left;
    pending.push_back(below);
    pending.push_back(above);
  }
  return owner;
}

}  // namespace apron::planes
