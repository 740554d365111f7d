#include "sph/fill_relaxation.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <unordered_map>

namespace apron::sph {
namespace {

using Point = std::array<double, 3>;

Point point(const Vec4& p) {
  return {p.x, p.y, p.z};
}

// Points hashed into cubic cells; each cell lists its points in the order they were added.
class Cells {
 public:
  // Cells of the given edge from the origin of coordinates: the same cells on every rank.
  explicit Cells(double edge) : edge_(edge) {}

  void add(const Point& p, int index) { cells_[key(cell_of(p))].push_back(index); }

  // Calls visit(index) for the points of every cell within `radius` of p's cell, cells in a fixed
  // order.
  template <class F>
  void for_each_near(const Point& p, double radius, F visit) const {
    const auto c = cell_of(p);
    const auto reach = static_cast<std::int64_t>(std::ceil(radius / edge_));
    for (std::int64_t i = -reach; i <= reach; ++i)
      for (std::int64_t j = -reach; j <= reach; ++j)
        for (std::int64_t k = -reach; k <= reach; ++k) {
          const auto it = cells_.find(key({c[0] + i, c[1] + j, c[2] + k}));
          if (it == cells_.end()) continue;
          for (int index : it->second) visit(index);
        }
  }

 private:
  std::array<std::int64_t, 3> cell_of(const Point& p) const {
    std::array<std::int64_t, 3> c{};
    for (int d = 0; d < 3; ++d) c[d] = static_cast<std::int64_t>(std::floor(p[d] / edge_));
    return c;
  }
  static std::int64_t key(const std::array<std::int64_t, 3>& c) {
    constexpr std::int64_t kBias = std::int64_t(1) << 20;  // cells of any sane domain
    return ((c[0] + kBias) << 42) | ((c[1] + kBias) << 21) | (c[2] + kBias);
  }

  double edge_;
  std::unordered_map<std::int64_t, std::vector<int>> cells_;
};

double distance(const Point& a, const Point& b) {
  const double x = a[0] - b[0], y = a[1] - b[1], z = a[2] - b[2];
  return std::sqrt(x * x + y * y + z * z);
}

}  // namespace

void relax_fill(const FillRelaxation& r, const std::vector<Vec4>& walls,
                const std::vector<std::int64_t>& id, std::vector<Vec4>& fluid) {
  const double dx = r.spacing;
  // Pairs of the lattices themselves are dx apart up to float round-off, not overlapping.
  const double contact = dx * (1 - 1e-4);
  std::vector<Point> wall_points(walls.size());
  std::transform(walls.begin(), walls.end(), wall_points.begin(), point);
  std::sort(wall_points.begin(), wall_points.end());
  Cells wall_cells(dx);
  for (std::size_t w = 0; w < wall_points.size(); ++w)
    wall_cells.add(wall_points[w], static_cast<int>(w));

  std::vector<Point> x(fluid.size());
  std::transform(fluid.begin(), fluid.end(), x.begin(), point);
  std::vector<int> by_id(fluid.size());
  std::iota(by_id.begin(), by_id.end(), 0);
  std::sort(by_id.begin(), by_id.end(), [&](int a, int b) { return id[a] < id[b]; });

  std::vector<std::uint8_t> movable(fluid.size(), 0);
  for (int a : by_id)
    wall_cells.for_each_near(x[a], r.wall_reach, [&](int w) {
      movable[a] |= distance(x[a], wall_points[w]) < r.wall_reach;
    });

  for (int sweep = 0; sweep < r.iterations; ++sweep) {
    Cells fluid_cells(dx);
    for (int a : by_id) fluid_cells.add(x[a], a);
    std::vector<Point> next = x;
    for (int a : by_id) {
      if (!movable[a]) continue;
      Point push{0, 0, 0};
      int pairs = 0;
      const auto part = [&](const Point& b, double share) {
        const double d = distance(x[a], b);
        if (d >= contact || d == 0) return;
        for (int k = 0; k < 3; ++k) push[k] += share * (dx - d) * (x[a][k] - b[k]) / d;
        ++pairs;
      };
      fluid_cells.for_each_near(x[a], dx, [&](int b) {
        if (b != a) part(x[b], movable[b] ? 0.5 : 1.0);
      });
      wall_cells.for_each_near(x[a], dx, [&](int w) { part(wall_points[w], 1.0); });
      if (pairs > 0)
        for (int k = 0; k < 3; ++k) next[a][k] += push[k] / pairs;
    }
    x.swap(next);
  }
  for (std::size_t i = 0; i < fluid.size(); ++i)
    fluid[i] = {static_cast<float>(x[i][0]), static_cast<float>(x[i][1]),
                static_cast<float>(x[i][2]), fluid[i].w};
}

}  // namespace apron::sph
