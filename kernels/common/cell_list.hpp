// Uniform-grid cell list (the paper's neighbour search): each particle's linear cell index, a radix
// sort of (cell, particle) pairs, and a cell-start array of length cells+1. With a cell edge equal
// to the interaction radius all neighbours lie in the 27 cells around a particle's own (the
// paper's choice); with half that edge they lie in 125 smaller cells whose volume is 42% less, so
// fewer candidates are tested (bench/NOTES.md).
#pragma once

#include "kernels/common/backend.hpp"
#include "kernels/common/particle_store.hpp"
#include "kernels/common/vec.hpp"

namespace apron {

struct GridSpec {
  float origin[3] = {0, 0, 0};
  float cell = 1;
  int dims[3] = {1, 1, 1};
  int reach = 1;  // cells searched on each side: ceil(radius / cell)

  // A grid covering `box` for neighbours within `radius`, with cells of edge radius / divisions.
  static GridSpec covering(const Box& box, double radius, int divisions = 1);
  std::size_t cell_count() const { return static_cast<std::size_t>(dims[0]) * dims[1] * dims[2]; }

  APRON_HD int coord(float x, int d) const {
    int c = static_cast<int>(floorf((x - origin[d]) / cell));
    return c < 0 ? 0 : (c >= dims[d] ? dims[d] - 1 : c);  // clamp strays to the edge cells
  }
  APRON_HD std::uint32_t linear(int cx, int cy, int cz) const {
    return static_cast<std::uint32_t>((cz * dims[1] + cy) * dims[0] + cx);
  }
  APRON_HD std::uint32_t cell_of(const Vec4& p) const {
    return linear(coord(p.x, 0), coord(p.y, 1), coord(p.z, 2));
  }
};

// Read-only device view of a built cell list: particles of cell c are [start[c], start[c+1]).
struct CellListView {
  GridSpec grid;
  const std::uint32_t* start = nullptr;

  // Calls f(j) for every particle j in the (2 reach + 1)^3 cells around p. Cells along x are
  // contiguous in the linear index, so each row of cells is one contiguous index range.
  template <class F>
  APRON_HD void for_each_candidate(const Vec4& p, F&& f) const {
    const int cx = grid.coord(p.x, 0), cy = grid.coord(p.y, 1), cz = grid.coord(p.z, 2);
    const int r = grid.reach;
    const int x0 = cx - r > 0 ? cx - r : 0;
    const int x1 = cx + r < grid.dims[0] ? cx + r : grid.dims[0] - 1;
    for (int z = cz - r; z <= cz + r; ++z) {
      if (z < 0 || z >= grid.dims[2]) continue;
      for (int y = cy - r; y <= cy + r; ++y) {
        if (y < 0 || y >= grid.dims[1]) continue;
        const std::uint32_t first = load(start + grid.linear(x0, y, z));
        const std::uint32_t last = load(start + grid.linear(x1, y, z) + 1);
        for (std::uint32_t j = first; j < last; ++j) f(j);
      }
    }
  }
};

class CellList {
 public:
  // Sorts the first n positions by cell. Afterwards order() maps sorted slot -> original index
  // (apply it to every particle array with ParticleStore::permute), and view() indexes the
  // particles in sorted order.
  void build(const GridSpec& grid, const DeviceVector<Vec4>& positions, std::size_t n);
  const IndexVector& order() const { return order_; }
  CellListView view() const { return {grid_, raw(cell_start_)}; }
  const GridSpec& grid() const { return grid_; }
  std::size_t device_bytes() const;

 private:
  void sort_pairs(int bits);

  GridSpec grid_;
  DeviceVector<std::uint32_t> keys_, keys_alt_;  // the alternates: radix sort double buffers
  IndexVector order_, order_alt_;
  DeviceVector<std::uint32_t> cell_start_;
};

}  // namespace apron
