#include "kernels/meshdist/meshdist_kernels.hpp"
#include "kernels/common/algorithms.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/common/primitives.hpp"
#include "kernels/meshdist/geometry.hpp"

namespace apron::meshdist {
namespace {

constexpr float kInfinity = __builtin_huge_valf();
constexpr int kNoTriangle = 0x7fffffff;

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

APRON_HD inline void offer_triangle(const Vec4* corners, int t, Vec3 p, Nearest& best) {
  const Vec4 a = load(corners + 3 * t), b = load(corners + 3 * t + 1),
             c = load(corners + 3 * t + 2);
  best.offer(distance2_to_triangle(p, xyz(a), xyz(b), xyz(c)), t);
}

APRON_HD inline float squared(float x) {
  return x * x;
}
APRON_HD inline int magnitude(int x) {
  return x < 0 ? -x : x;
}

// The paper's search (its Fig. 2): the cells at Chebyshev distance r from the sample's cell form
// shell r; after each shell, stop once everything not yet searched is farther than the nearest
// triangle found.
struct ShellSearch {
  GridGeometry g;
  const Vec4* corners;
  const std::uint32_t* cell_start;     // the pairs of cell c: [cell_start[c], cell_start[c+1])
  const std::uint32_t* pair_triangle;  // by cell

  APRON_HD void visit(Vec3 p, int i, int j, int k, Nearest& best) const {
    const std::uint32_t cell = g.linear(i, j, k);
    const std::uint32_t stop = cell_start[cell + 1];
    for (std::uint32_t n = cell_start[cell]; n < stop; ++n)
      offer_triangle(corners, static_cast<int>(load(pair_triangle + n)), p, best);
  }

  // Squared distance from p to the slab of the grid beyond face `side` of the searched box
  // [lo, hi] along `axis` (with the margin toward p, so it never overestimates).
  APRON_HD float slab_distance2(Vec3 p, int axis, bool upper, const int lo[3],
                                const int hi[3]) const {
    const float q[3] = {p.x, p.y, p.z};
    float d2 = 0;
    for (int d = 0; d < 3; ++d) {
      float box_lo = g.origin[d] - g.margin, box_hi = g.origin[d] + g.dims[d] * g.cell + g.margin;
      if (d == axis) {
        if (upper)
          box_lo = g.origin[d] + (hi[d] + 1) * g.cell - g.margin;
        else
          box_hi = g.origin[d] + lo[d] * g.cell + g.margin;
      }
      if (q[d] < box_lo) d2 += squared(box_lo - q[d]);
      if (q[d] > box_hi) d2 += squared(q[d] - box_hi);
    }
    return d2;
  }

  // Lower bound on the squared distance to any triangle outside the searched box; negative when
  // the box covers the whole grid.
  APRON_HD float unsearched_distance2(Vec3 p, const int lo[3], const int hi[3]) const {
    float bound = -1;
    for (int d = 0; d < 3; ++d) {
      if (lo[d] > 0) {
        const float s = slab_distance2(p, d, false, lo, hi);
        bound = bound < 0 || s < bound ? s : bound;
      }
      if (hi[d] < g.dims[d] - 1) {
        const float s = slab_distance2(p, d, true, lo, hi);
        bound = bound < 0 || s < bound ? s : bound;
      }
    }
    return bound;
  }

  APRON_HD void visit_shell(Vec3 p, const int c[3], int r, const int lo[3], const int hi[3],
                            Nearest& best) const {
    for (int k = lo[2]; k <= hi[2]; ++k)
      for (int j = lo[1]; j <= hi[1]; ++j) {
        const bool inner_row = magnitude(k - c[2]) < r && magnitude(j - c[1]) < r;
        if (!inner_row) {
          for (int i = lo[0]; i <= hi[0]; ++i) visit(p, i, j, k, best);
          continue;
        }
        if (c[0] - r >= 0) visit(p, c[0] - r, j, k, best);  // only the two ends of inner rows
        if (c[0] + r < g.dims[0]) visit(p, c[0] + r, j, k, best);
      }
  }

  APRON_HD Nearest operator()(Vec3 p) const {
    Nearest best{kInfinity, kNoTriangle};
    const int c[3] = {g.coord(p.x, 0), g.coord(p.y, 1), g.coord(p.z, 2)};
    for (int r = 0;; ++r) {
      int lo[3], hi[3];
      for (int d = 0; d < 3; ++d) {
        lo[d] = c[d] - r < 0 ? 0 : c[d] - r;
        hi[d] = c[d] + r >= g.dims[d] ? g.dims[d] - 1 : c[d] + r;
      }
      visit_shell(p, c, r, lo, hi, best);
      const float bound = unsearched_distance2(p, lo, hi);
      if (bound < 0 || bound > best.d2) return best;
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

// Counter-based random numbers (SplitMix64's mixer): value j of sample k depends only on
// (seed, k, j), whatever thread or rank computes it.
APRON_HD inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
APRON_HD inline std::uint64_t random_bits(std::uint64_t seed, std::uint64_t k, unsigned j) {
  return mix64(mix64(seed + 0x9e3779b97f4a7c15ull) ^ (2 * k + j));
}

struct MakeSamples {
  const Vec4* vertices;
  std::uint64_t vertex_count;
  const Vec4* corners;
  const double* cumulative_area;
  std::size_t triangles;
  std::uint64_t seed, first;
  Vec4* out;

  // The first triangle whose cumulative area exceeds `target`.
  APRON_HD std::size_t pick_triangle(double target) const {
    std::size_t lo = 0, hi = triangles - 1;
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      if (cumulative_area[mid] > target)
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  }

  APRON_HD void operator()(std::size_t i) const {
    const std::uint64_t g = first + i;
    if (g < vertex_count) {
      out[i] = vertices[g];
      return;
    }
    const std::uint64_t k = g - vertex_count;
    const double u = static_cast<double>(random_bits(seed, k, 0) >> 11) * 0x1.0p-53;
    const std::size_t t = pick_triangle(u * cumulative_area[triangles - 1]);
    const std::uint64_t bits = random_bits(seed, k, 1);
    const float u2 = static_cast<float>(bits >> 40) * 0x1.0p-24f;
    const float u3 = static_cast<float>((bits >> 8) & 0xffffffu) * 0x1.0p-24f;
    // Uniform on the triangle: a + s(1 - u3) ab + s u3 ac with s = sqrt(u2).
    const float s = sqrtf(u2);
    const Vec3 a = xyz(corners[3 * t]), b = xyz(corners[3 * t + 1]), c = xyz(corners[3 * t + 2]);
    out[i] = with_w(a + (s * (1 - u3)) * (b - a) + (s * u3) * (c - a), 0);
  }
};

struct StatsOfSample {
  const float* distance;
  std::uint64_t first;
  APRON_HD DistanceStats operator()(std::size_t i) const {
    const double d = distance[i];
    return {d, d * d, distance[i], first + i};
  }
};

struct CombineStats {
  APRON_HD DistanceStats operator()(const DistanceStats& a, const DistanceStats& b) const {
    DistanceStats out{a.sum + b.sum, a.sum_squares + b.sum_squares, a.max, a.argmax};
    if (b.max > a.max || (b.max == a.max && b.argmax < a.argmax)) {
      out.max = b.max;
      out.argmax = b.argmax;
    }
    return out;
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
  const double limit = static_cast<double>(std::min(
      options.max_cells, std::max<std::size_t>(4096, options.max_cells_per_triangle * triangles)));
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
    throw std::runtime_error("meshdist grid: " + std::to_string(total) +
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
  const ShellSearch search{geometry_, mesh.corners.data(), cells_.view().start,
                           raw(cells_.order())};
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

void make_samples(DeviceSpan<const Vec4> vertices, const TriangleSoup& mesh,
                  DeviceSpan<const double> cumulative_area, std::uint64_t seed, std::uint64_t first,
                  DeviceSpan<Vec4> samples) {
  for_each_index(samples.size(),
                 MakeSamples{vertices.data(), vertices.size(), mesh.corners.data(),
                             cumulative_area.data(), mesh.size(), seed, first, samples.data()});
}

void make_samples(DeviceSpan<const Vec4> vertices, const TriangleSoup& mesh,
                  DeviceSpan<const double> cumulative_area, std::uint64_t seed, std::uint64_t first,
                  std::size_t count, DeviceVector<Vec4>& samples) {
  samples.resize(count);
  make_samples(vertices, mesh, cumulative_area, seed, first,
               DeviceSpan<Vec4>(raw(samples), samples.size()));
}

DistanceStats reduce_distances(DeviceSpan<const float> distance, std::uint64_t first) {
  return transform_reduce(distance.size(), StatsOfSample{distance.data(), first}, DistanceStats{},
                          CombineStats{});
}

}  // namespace apron::meshdist
