#include "kernels/common/cell_list.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/common/algorithms.hpp"
#include "kernels/common/primitives.hpp"

namespace apron {

GridSpec GridSpec::covering(const Box& box, double radius, int divisions) {
  GridSpec g;
  // A hair larger than radius / divisions, so that rounding never puts a neighbour one cell
  // beyond the reach.
  const double cell = radius / divisions * (1 + 1e-6);
  g.cell = static_cast<float>(cell);
  g.reach = divisions;
  double cells = 1;
  for (int d = 0; d < 3; ++d) {
    g.origin[d] = static_cast<float>(box.lo[d]);
    g.dims[d] = std::max(1, static_cast<int>(std::ceil(box.extent(d) / cell)));
    cells *= g.dims[d];
  }
  if (cells >= std::numeric_limits<std::uint32_t>::max())
    throw std::runtime_error("cell grid too large: " + std::to_string(cells) + " cells");
  return g;
}

namespace {
struct CellKey {
  GridSpec grid;
  const Vec4* pos;
  std::uint32_t* keys;
  APRON_HD void operator()(std::size_t i) const { keys[i] = grid.cell_of(pos[i]); }
};

// Sorted slot i ends its cell's run when the next slot's key differs: end[key + 1] = i + 1.
struct MarkCellEnds {
  const std::uint32_t* keys;
  std::size_t n;
  std::uint32_t* end;
  APRON_HD void operator()(std::size_t i) const {
    if (i + 1 == n || keys[i + 1] != keys[i]) end[keys[i] + 1] = static_cast<std::uint32_t>(i + 1);
  }
};

struct ReadStart {
  const std::uint32_t* start;
  APRON_HD std::uint32_t operator()(std::size_t c) const { return start[c]; }
};
}  // namespace

void CellList::sort_entries(const GridSpec& grid, const DeviceVector<Vec4>& positions,
                            std::size_t n) {
  grid_ = grid;
  resize_entries(n);
  for_each_index(n, CellKey{grid, raw(positions), raw(keys_)});
  apron::sequence(order_.begin(), order_.end());
  // Only the bits a cell index can use: a grid of 4M cells (22 bits) takes 3 radix passes, not 4.
  sort_pairs(keys_, order_, n, key_bits(grid.cell_count()), keys_alt_, order_alt_);
}

// start[c] = first sorted slot whose key is >= c, for c = 0..cells (the last is n): the slot
// after each occupied cell's run is the start of the cell after it, and every other cell starts
// where the last occupied cell before it ended (a maximum scan: run ends grow with the key).
void CellList::index_cells() {
  const std::size_t n = keys_.size(), cells = grid_.cell_count();
  cell_start_.resize(cells + 1);
  apron::fill(cell_start_.begin(), cell_start_.end(), std::uint32_t{0});
  for_each_index(n, MarkCellEnds{raw(keys_), n, raw(cell_start_)});
  inclusive_scan<std::uint32_t>(cells + 1, ReadStart{raw(cell_start_)}, raw(cell_start_),
                                Maximum{});
}

void CellList::build(const GridSpec& grid, const DeviceVector<Vec4>& positions, std::size_t n) {
  sort_entries(grid, positions, n);
  index_cells();
}

void CellList::sort(const GridSpec& grid, const DeviceVector<Vec4>& positions, std::size_t n) {
  sort_entries(grid, positions, n);
}

void CellList::resize_entries(std::size_t n) {
  if (n > std::numeric_limits<std::uint32_t>::max())
    throw std::runtime_error("cell list: " + std::to_string(n) + " entries exceed 32-bit indices");
  resize_per_particle(keys_, n);
  resize_per_particle(order_, n);
}

void CellList::build_from_entries(const GridSpec& grid) {
  grid_ = grid;
  sort_pairs(keys_, order_, keys_.size(), key_bits(grid.cell_count()), keys_alt_, order_alt_);
  index_cells();
}

std::size_t CellList::device_bytes() const {
  return (keys_.capacity() + order_.capacity() + keys_alt_.capacity() + order_alt_.capacity() +
          cell_start_.capacity()) *
         4;
}

}  // namespace apron
