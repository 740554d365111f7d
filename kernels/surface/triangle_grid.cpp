#include "kernels/surface/triangle_grid.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/common/algorithms.hpp"
#include "kernels/common/primitives.hpp"
#include "kernels/surface/shell_search.hpp"

namespace apron::surface {
namespace {

APRON_HD inline void cell_range(const GridGeometry& g, const Vec4* corners, std::size_t t,
                                int lo[3], int hi[3]) {
  const Vec4 a = load(corners + 3 * t), b = load(corners + 3 * t + 1),
             c = load(corners + 3 * t + 2);
  const float mins[3] = {fminf(a.x, fminf(b.x, c.x)), fminf(a.y, fminf(b.y, c.y)),
                         fminf(a.z, fminf(b.z, c.z))};
  const float maxs[3] = {fmaxf(a.x, fmaxf(b.x, c.x)), fmaxf(a.y, fmaxf(b.y, c.y)),
                         fmaxf(a.z, fmaxf(b.z, c.z))};
  for (int d = 0; d < 3; ++d) {
    lo[d] = g.coord(mins[d], d);
    hi[d] = g.coord(maxs[d], d);
  }
}

struct GatherCorners {
  const Vec4* vertices;
  const std::uint32_t* corner_vertex;
  Vec4* corners;
  APRON_HD void operator()(std::size_t c) const { corners[c] = vertices[corner_vertex[c]]; }
};

struct CountCells {
  GridGeometry g;
  const Vec4* corners;
  std::uint32_t* count;
  APRON_HD void operator()(std::size_t t) const {
    int lo[3], hi[3];
    cell_range(g, corners, t, lo, hi);
    count[t] =
        static_cast<std::uint32_t>((hi[0] - lo[0] + 1) * (hi[1] - lo[1] + 1) * (hi[2] - lo[2] + 1));
  }
};

struct WritePairs {
  GridGeometry g;
  const Vec4* corners;
  const std::uint32_t* offset;
  std::uint32_t* pair_cell;
  std::uint32_t* pair_triangle;
  APRON_HD void operator()(std::size_t t) const {
    int lo[3], hi[3];
    cell_range(g, corners, t, lo, hi);
    std::uint32_t out = offset[t];
    for (int k = lo[2]; k <= hi[2]; ++k)
      for (int j = lo[1]; j <= hi[1]; ++j)
        for (int i = lo[0]; i <= hi[0]; ++i) {
          pair_cell[out] = g.linear(i, j, k);
          pair_triangle[out] = static_cast<std::uint32_t>(t);
          ++out;
        }
  }
};

// Sample i's cell and index: the pairs that, sorted by cell, give the order of the search.
struct SampleCells {
  GridSpec g;
  const Vec4* samples;
  std::uint32_t* cell;
  std::uint32_t* order;
  APRON_HD void operator()(std::size_t i) const {
    cell[i] = g.cell_of(samples[i]);
    order[i] = static_cast<std::uint32_t>(i);
  }
};

struct SearchSorted {
  ShellSearch search;
  const Vec4* samples;
  const std::uint32_t* order;
  float* distance;
  int* triangle;
  APRON_HD void operator()(std::size_t i) const {
    const std::uint32_t s = order[i];
    const Nearest n = search(xyz(samples[s]));
    distance[s] = sqrtf(n.d2);
    triangle[s] = n.triangle;
  }
};

struct BruteForce {
  const Vec4* corners;
  std::size_t triangles;
  const Vec4* samples;
  float* distance;
  int* triangle;
  APRON_HD void operator()(std::size_t s) const {
    Nearest best{kInfinity, kNoTriangle};
    const Vec3 p = xyz(samples[s]);
    for (std::size_t t = 0; t < triangles; ++t)
      offer_triangle(corners, static_cast<int>(t), p, best);
    distance[s] = sqrtf(best.d2);
    triangle[s] = best.triangle;
  }
};

}  // namespace

GridGeometry choose_grid(const double lo[3], const double hi[3], double total_area,
                         std::size_t triangles, const GridOptions& options) {
  GridGeometry g;
  double extent[3], largest = 0, max_abs = 0;
  for (int d = 0; d < 3; ++d) {
    g.origin[d] = static_cast<float>(lo[d]);
    extent[d] = std::max(hi[d] - g.origin[d], 0.0);
    largest = std::max(largest, extent[d]);
    max_abs = std::max({max_abs, std::abs(lo[d]), std::abs(hi[d])});
  }
  const double n = static_cast<double>(std::max<std::size_t>(triangles, 1));
  double cell = options.cell_factor * std::sqrt(total_area / n);
  if (!(cell > 0) || !std::isfinite(cell)) cell = largest > 0 ? largest / std::cbrt(n) : 1.0;
  double limit = static_cast<double>(std::min(
      options.max_cells, std::max<std::size_t>(4096, options.max_cells_per_triangle * triangles)));
  if (options.max_cell_edge > 0 && cell > options.max_cell_edge) {
    cell = options.max_cell_edge;
    limit = static_cast<double>(options.max_cells);
  }
  for (;;) {
    double cells = 1;
    for (int d = 0; d < 3; ++d) {
      g.dims[d] = static_cast<int>(std::max(1.0, std::ceil(extent[d] / cell)));
      cells *= g.dims[d];
    }
    if (cells <= limit) break;
    cell *= 1.01 * std::cbrt(cells / limit);
  }
  g.cell = static_cast<float>(cell);
  // Rounding in (x - lo) / cell is a few float ulps of the coordinates; the margin is far larger.
  g.margin = static_cast<float>(1e-3 * cell + 1e-5 * max_abs);
  return g;
}

TriangleSoup gather_corners(DeviceSpan<const Vec4> vertices,
                            DeviceSpan<const std::uint32_t> corner_vertex,
                            DeviceSpan<Vec4> corners) {
  if (corners.size() != corner_vertex.size())
    throw std::invalid_argument("gather_corners: one corner per corner index");
  for_each_index(corner_vertex.size(),
                 GatherCorners{vertices.data(), corner_vertex.data(), corners.data()});
  return {corners};
}

void TriangleGrid::build(const TriangleSoup& mesh, const GridGeometry& geometry) {
  geometry_ = geometry;
  const std::size_t n = mesh.size();
  DeviceVector<std::uint32_t>& count = first_pair_;  // the counts, then their exclusive scan
  count.resize(n);
  for_each_index(n, CountCells{geometry_, mesh.corners.data(), raw(count)});
  const std::uint64_t total = reduce_sum(count, n);
  if (total >= (std::uint64_t(1) << 32))
    throw std::runtime_error("surface grid: " + std::to_string(total) +
                             " (cell, triangle) pairs exceed 32-bit indices");
  exclusive_scan(count, n, count);
  cells_.resize_entries(total);
  for_each_index(n, WritePairs{geometry_, mesh.corners.data(), raw(count), cells_.entry_cells(),
                               cells_.entry_items()});
  cells_.build_from_entries(geometry_);
}

// All four at full size: the sort's double buffers take the keys' size, so none grows later.
void SampleOrder::reserve(std::size_t samples) {
  for (auto* v : {&cell_, &order_, &cell_alt_, &order_alt_})
    if (v->size() < samples) v->resize(samples);
}

void SampleOrder::sort(const GridSpec& grid, DeviceSpan<const Vec4> samples) {
  const std::size_t n = samples.size();
  reserve(n);
  for_each_index(n, SampleCells{grid, samples.data(), raw(cell_), raw(order_)});
  sort_pairs(cell_, order_, n, key_bits(grid.cell_count()), cell_alt_, order_alt_);
}

std::size_t SampleOrder::device_bytes() const {
  return 4 * (cell_.capacity() + order_.capacity() + cell_alt_.capacity() + order_alt_.capacity());
}

void TriangleGrid::nearest(const TriangleSoup& mesh, DeviceSpan<const Vec4> samples,
                           DeviceSpan<float> distance, DeviceSpan<int> triangle,
                           SampleOrder& order) const {
  const std::size_t n = samples.size();
  if (distance.size() < n || triangle.size() < n)
    throw std::invalid_argument("TriangleGrid::nearest: outputs shorter than the samples");
  order.sort(geometry_, samples);
  const ShellSearch search = shell_search(*this, mesh);
  for_each_index(
      n, SearchSorted{search, samples.data(), order.indices(), distance.data(), triangle.data()});
}

void TriangleGrid::nearest(const TriangleSoup& mesh, const DeviceVector<Vec4>& samples,
                           DeviceVector<float>& distance, DeviceVector<int>& triangle) {
  distance.resize(samples.size());
  triangle.resize(samples.size());
  nearest(mesh, samples, DeviceSpan<float>(raw(distance), distance.size()),
          DeviceSpan<int>(raw(triangle), triangle.size()), order_);
}

std::size_t TriangleGrid::device_bytes() const {
  return cells_.device_bytes() + 4 * first_pair_.capacity() + order_.device_bytes();
}

void nearest_brute_force(const TriangleSoup& mesh, DeviceSpan<const Vec4> samples,
                         DeviceSpan<float> distance, DeviceSpan<int> triangle) {
  if (distance.size() < samples.size() || triangle.size() < samples.size())
    throw std::invalid_argument("nearest_brute_force: outputs shorter than the samples");
  for_each_index(samples.size(), BruteForce{mesh.corners.data(), mesh.size(), samples.data(),
                                            distance.data(), triangle.data()});
}

void nearest_brute_force(const TriangleSoup& mesh, const DeviceVector<Vec4>& samples,
                         DeviceVector<float>& distance, DeviceVector<int>& triangle) {
  distance.resize(samples.size());
  triangle.resize(samples.size());
  nearest_brute_force(mesh, samples, DeviceSpan<float>(raw(distance), distance.size()),
                      DeviceSpan<int>(raw(triangle), triangle.size()));
}

}  // namespace apron::surface
