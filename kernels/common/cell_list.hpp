// Uniform-grid cell list (the paper's neighbour search): each particle's linear cell index, a radix
// sort of (cell, particle) pairs, and a cell-start array of length cells+1. With a cell edge equal
// to the interaction radius all neighbours lie in the 27 cells around a particle's own (the
// paper's choice); with half that edge they lie in 125 smaller cells whose volume is 42% less, so
// fewer candidates are tested (bench/NOTES.md). The same build bins items that cover several
// cells (triangles): the caller writes (cell, item) entries, the list sorts them.
#pragma once

#include "kernels/common/backend.hpp"
#include "kernels/common/particle_store.hpp"
#include "kernels/common/uniform_grid.hpp"
#include "kernels/common/vec.hpp"

namespace apron {

// Read-only device view of a built cell list: particles of cell c are [start[c], start[c+1]).
struct CellListView {
  GridSpec grid;
  const std::uint32_t* start = nullptr;

  // Calls row(first, last) for each of the (2 reach + 1)^2 rows of cells around p; the particles
  // j in [first, last) of a row lie in its 2 reach + 1 cells (cells along x are contiguous in the
  // linear index, so a row of cells is one contiguous index range).
  template <class F>
  APRON_HD void for_each_row(const Vec4& p, F&& row) const {
    const int cx = grid.coord(p.x, 0), cy = grid.coord(p.y, 1), cz = grid.coord(p.z, 2);
    const int r = grid.reach;
    const int x0 = cx - r > 0 ? cx - r : 0;
    const int x1 = cx + r < grid.dims[0] ? cx + r : grid.dims[0] - 1;
    for (int z = cz - r; z <= cz + r; ++z) {
      if (z < 0 || z >= grid.dims[2]) continue;
      for (int y = cy - r; y <= cy + r; ++y) {
        if (y < 0 || y >= grid.dims[1]) continue;
        row(load(start + grid.linear(x0, y, z)), load(start + grid.linear(x1, y, z) + 1));
      }
    }
  }

  // Calls f(j) for every particle j in the (2 reach + 1)^3 cells around p.
  template <class F>
  APRON_HD void for_each_candidate(const Vec4& p, F&& f) const {
    for_each_row(p, [&](std::uint32_t first, std::uint32_t last) {
      for (std::uint32_t j = first; j < last; ++j) f(j);
    });
  }

  // Calls visit(j) for every candidate j around p for which the cheap test inside(j) holds. The
  // test runs first over up to 32 candidates of a row into a bit mask, then visit over its set
  // bits. Why: only about a quarter of the candidates lie inside the support, and the lanes of a
  // GPU warp test different candidates in step; with visit under the test's branch, the warp runs
  // visit whenever any of its 32 lanes has a neighbour, that is for nearly every candidate. Over a
  // mask it runs as often as the lane with the most neighbours in that row needs.
  template <class Inside, class Visit>
  APRON_HD void for_each_neighbour(const Vec4& p, Inside&& inside, Visit&& visit) const {
    for_each_chunk(p, [&](std::uint32_t chunk, std::uint32_t end) {
      for (std::uint32_t mask = test_chunk(chunk, end, inside); mask != 0; mask &= mask - 1)
        visit(chunk + lowest_set_bit(mask));
    });
  }

  // The two steps of for_each_neighbour, public for searches that keep the masks (a
  // neighbour record). Bit j - chunk set for each j in [chunk, end) (at most 32) with inside(j).
  template <class Inside>
  APRON_HD static std::uint32_t test_chunk(std::uint32_t chunk, std::uint32_t end,
                                           Inside&& inside) {
    std::uint32_t mask = 0, bit = 1;
    for (std::uint32_t j = chunk; j < end; ++j, bit <<= 1)
      if (inside(j)) mask |= bit;
    return mask;
  }

  // Calls chunk(first, end) for the candidates of each row in pieces of at most 32.
  template <class F>
  APRON_HD void for_each_chunk(const Vec4& p, F&& chunk) const {
    for_each_row(p, [&](std::uint32_t first, std::uint32_t last) {
      for (std::uint32_t at = first; at < last; at += 32)
        chunk(at, last - at < 32 ? last : at + 32);
    });
  }
};

class CellList {
 public:
  // Sorts the first n positions by cell. Afterwards order() maps sorted slot -> original index
  // (apply it to every particle array with ParticleStore::permute), and view() indexes the
  // particles in sorted order.
  void build(const GridSpec& grid, const DeviceVector<Vec4>& positions, std::size_t n);
  // build() without the cell-start array (view() is not valid afterwards): only order(), to
  // visit points in cell order for coherent memory access.
  void sort(const GridSpec& grid, const DeviceVector<Vec4>& positions, std::size_t n);

  // Items binned by the caller, any number of cells each: resize_entries(n), write entry i's
  // cell to entry_cells()[i] and its item to entry_items()[i] on the device, then
  // build_from_entries(). Afterwards the items of cell c are order()[start[c] .. start[c+1]),
  // in entry order within a cell.
  void resize_entries(std::size_t n);
  std::uint32_t* entry_cells() { return raw(keys_); }
  std::uint32_t* entry_items() { return raw(order_); }
  void build_from_entries(const GridSpec& grid);

  const IndexVector& order() const { return order_; }
  std::size_t size() const { return order_.size(); }
  CellListView view() const { return {grid_, raw(cell_start_)}; }
  const GridSpec& grid() const { return grid_; }
  std::size_t device_bytes() const;

 private:
  void sort_entries(const GridSpec& grid, const DeviceVector<Vec4>& positions, std::size_t n);
  void index_cells();

  GridSpec grid_;
  DeviceVector<std::uint32_t> keys_, keys_alt_;  // the alternates: radix sort double buffers
  IndexVector order_, order_alt_;
  DeviceVector<std::uint32_t> cell_start_;
};

}  // namespace apron
