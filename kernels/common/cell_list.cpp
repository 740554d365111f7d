#include "kernels/common/cell_list.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <thrust/binary_search.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>

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
}  // namespace

void CellList::build(const GridSpec& grid, const DeviceVector<Vec4>& positions, std::size_t n) {
  grid_ = grid;
  keys_.resize(n);
  order_.resize(n);
  for_each_index(n, CellKey{grid, raw(positions), raw(keys_)});
  thrust::sequence(policy(), order_.begin(), order_.end());
  thrust::sort_by_key(policy(), keys_.begin(), keys_.end(), order_.begin());
  // start[c] = first sorted slot whose key is >= c, for c = 0..cells (the last is n).
  cell_start_.resize(grid.cell_count() + 1);
  thrust::lower_bound(
      policy(), keys_.begin(), keys_.end(), thrust::counting_iterator<std::uint32_t>(0),
      thrust::counting_iterator<std::uint32_t>(grid.cell_count() + 1), cell_start_.begin());
}

std::size_t CellList::device_bytes() const {
  return (keys_.capacity() + order_.capacity() + cell_start_.capacity()) * 4;
}

}  // namespace apron
