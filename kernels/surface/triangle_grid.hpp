// The surface-query service's acceleration structure: a uniform grid over a triangle mesh, built
// on the device in parallel (the construction of Zhang, Tang, Wu 2011: count cells per triangle,
// scan, write (cell, triangle) pairs, sort by cell), and the nearest-triangle search in growing
// shells of cells. Rebuilding it is a sort of the pairs, so a moving mesh is tracked exactly by
// building again (refit() of SurfaceQuery). The mesh and per-query arrays are DeviceSpans.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/backend.hpp"
#include "kernels/common/cell_list.hpp"
#include "kernels/common/device_arena.hpp"
#include "kernels/common/vec.hpp"

namespace apron::surface {

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
  // > 0: cells no larger than this (up to max_cells), however few the triangles: a coarse mesh
  // queried by many points close to it (particles within a spacing of a wall) then finds most
  // of them in empty cells.
  double max_cell_edge = 0;
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
  // The triangles of cell c are cell_triangles()[cell_start()[c] .. cell_start()[c + 1]).
  const std::uint32_t* cell_start() const { return cells_.view().start; }
  const std::uint32_t* cell_triangles() const { return raw(cells_.order()); }
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

}  // namespace apron::surface
