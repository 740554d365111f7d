// Device side of the mesh-to-mesh distance (Zhang, Tang, Wu 2011): a uniform grid over the
// triangles of the target mesh built in parallel, the per-sample search in growing shells of
// cells, a brute-force reference, and area-uniform surface sampling from a counter-based RNG.
// The mesh and per-sample arrays are DeviceSpans (parts of one DeviceArena in the analysis);
// the forms taking DeviceVectors size them and are there for tests and one-off callers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/backend.hpp"
#include "kernels/common/cell_list.hpp"
#include "kernels/common/vec.hpp"
#include "kernels/meshdist/device_arena.hpp"

namespace apron::meshdist {

// Triangles as three corners each: corners[3t], corners[3t+1], corners[3t+2] (w unused). One
// gathered array keeps a triangle's data in one 48-byte read.
struct TriangleSoup {
  DeviceSpan<const Vec4> corners;
  std::size_t size() const { return corners.size() / 3; }
};

// corners[c] = vertices[corner_vertex[c]]: the soup of an indexed mesh, built on the device.
TriangleSoup gather_corners(DeviceSpan<const Vec4> vertices,
                            DeviceSpan<const std::uint32_t> corner_vertex,
                            DeviceSpan<Vec4> corners);

// The grid over the target mesh: the common uniform grid, plus the slack on cell boundaries that
// absorbs float rounding in cell assignment (the shell search's bound keeps it toward the sample).
struct GridGeometry : GridSpec {
  float margin = 0;
};

struct GridOptions {
  double cell_factor = 2.0;  // cell edge = cell_factor * sqrt(total area / triangles)
  std::size_t max_cells_per_triangle = 8;
  std::size_t max_cells = std::size_t(1) << 26;  // 512 MiB of cell ranges at most
};

// Geometry of the grid for a mesh with bounding box [lo, hi] and the given total area.
GridGeometry choose_grid(const double lo[3], const double hi[3], double total_area,
                         std::size_t triangles, const GridOptions& options = {});

// The order in which a search visits its samples: their cells and indices, sorted by cell (with
// the sort's double buffers). One serves any number of grids: sized for the most samples it will
// order (reserve()), it allocates nothing after.
class SampleOrder {
 public:
  void reserve(std::size_t samples);
  // Afterwards indices()[i], i < samples.size(), is the i-th sample in cell order.
  void sort(const GridSpec& grid, DeviceSpan<const Vec4> samples);
  const std::uint32_t* indices() const { return raw(order_); }
  std::size_t device_bytes() const;

 private:
  DeviceVector<std::uint32_t> cell_, order_, cell_alt_, order_alt_;
};

// The grid over one target mesh and the search against it. Its arrays keep their size from one
// build over the same mesh to the next (a repeated analysis allocates nothing); an analysis of
// two directions keeps one grid per target rather than regrowing one.
class TriangleGrid {
 public:
  // Count cells per triangle, exclusive scan, write (cell, triangle) pairs, sort by cell, mark
  // cell boundaries (the paper's construction), through the common cell list.
  void build(const TriangleSoup& mesh, const GridGeometry& geometry);

  // Distance (not squared) and nearest triangle for every sample, searched shell by shell, into
  // the first samples.size() elements of distance and triangle. Samples are visited in cell order
  // for coherent memory access (`order` sorts them; the second form uses the grid's own).
  void nearest(const TriangleSoup& mesh, DeviceSpan<const Vec4> samples, DeviceSpan<float> distance,
               DeviceSpan<int> triangle, SampleOrder& order) const;
  void nearest(const TriangleSoup& mesh, const DeviceVector<Vec4>& samples,
               DeviceVector<float>& distance, DeviceVector<int>& triangle);

  const GridGeometry& geometry() const { return geometry_; }
  std::size_t pairs() const { return cells_.size(); }
  std::size_t device_bytes() const;

 private:
  GridGeometry geometry_;
  CellList cells_;  // (cell, triangle) pairs: the triangles of cell c, by cell
  // Pairs per triangle, then (scanned in place) each triangle's first pair: build() scratch.
  DeviceVector<std::uint32_t> first_pair_;
  SampleOrder order_;  // for the search into device vectors
};

// The reference: every sample against every triangle.
void nearest_brute_force(const TriangleSoup& mesh, DeviceSpan<const Vec4> samples,
                         DeviceSpan<float> distance, DeviceSpan<int> triangle);
void nearest_brute_force(const TriangleSoup& mesh, const DeviceVector<Vec4>& samples,
                         DeviceVector<float>& distance, DeviceVector<int>& triangle);

// Samples with global indices [first, first + count): index g < vertices.size() is vertex g; the
// others are area-uniform points on the surface, point g - vertices.size() of the sequence that
// `seed` determines. `cumulative_area` is the inclusive prefix sum of triangle areas (float64,
// computed once on the host so every rank sees the same bits). A sample depends only on its
// global index, so any split over ranks yields the same samples.
// `samples` holds them: count elements of a span, or a device vector resized to count.
void make_samples(DeviceSpan<const Vec4> vertices, const TriangleSoup& mesh,
                  DeviceSpan<const double> cumulative_area, std::uint64_t seed, std::uint64_t first,
                  DeviceSpan<Vec4> samples);
void make_samples(DeviceSpan<const Vec4> vertices, const TriangleSoup& mesh,
                  DeviceSpan<const double> cumulative_area, std::uint64_t seed, std::uint64_t first,
                  std::size_t count, DeviceVector<Vec4>& samples);

// Float64 sums and the maximum with the lowest global index attaining it.
struct DistanceStats {
  double sum = 0;
  double sum_squares = 0;
  float max = -1;
  std::uint64_t argmax = ~std::uint64_t(0);  // global sample index
};
DistanceStats reduce_distances(DeviceSpan<const float> distance, std::uint64_t first);

}  // namespace apron::meshdist
