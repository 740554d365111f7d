#include "kernels/common/cell_list.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <thrust/fill.h>
#include <thrust/scan.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>

#if defined(__CUDACC__)
#include <cub/device/device_radix_sort.cuh>
#endif

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

// Sorted slot i starts its cell when its key differs from slot i-1's.
struct MarkCellStarts {
  const std::uint32_t* keys;
  std::uint32_t* start;
  APRON_HD void operator()(std::size_t i) const {
    if (i == 0 || keys[i] != keys[i - 1]) start[keys[i]] = static_cast<std::uint32_t>(i);
  }
};

struct Minimum {
  APRON_HD std::uint32_t operator()(std::uint32_t a, std::uint32_t b) const {
    return a < b ? a : b;
  }
};
}  // namespace

// Sorts (key, value) pairs by the low `bits` bits of the keys (the rest are zero): radix sort
// passes cover 8 bits each, so a grid of 4M cells (22 bits) needs 3 passes instead of 4. The
// sorted pairs end in keys_ and order_ (the buffers swap with their alternates as needed).
void CellList::sort_pairs(int bits) {
#if defined(__CUDACC__)
  if (keys_.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::runtime_error("cell list: more than 2^31 particles on one device");
  const auto n = static_cast<int>(keys_.size());
  resize_per_particle(keys_alt_, keys_.size());
  resize_per_particle(order_alt_, order_.size());
  cub::DoubleBuffer<std::uint32_t> keys(raw(keys_), raw(keys_alt_));
  cub::DoubleBuffer<std::uint32_t> values(raw(order_), raw(order_alt_));
  std::size_t temp_bytes = 0;
  cudaError_t status =
      cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, values, n, 0, bits);
  auto& scratch = scratch_allocator();
  char* temp = scratch.allocate(static_cast<std::ptrdiff_t>(temp_bytes));
  if (status == cudaSuccess)
    status = cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, values, n, 0, bits);
  scratch.deallocate(temp, temp_bytes);
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("cell list radix sort: ") + cudaGetErrorString(status));
  if (keys.Current() != raw(keys_)) keys_.swap(keys_alt_);
  if (values.Current() != raw(order_)) order_.swap(order_alt_);
#else
  (void)bits;
  thrust::sort_by_key(policy(), keys_.begin(), keys_.end(), order_.begin());
#endif
}

void CellList::build(const GridSpec& grid, const DeviceVector<Vec4>& positions, std::size_t n) {
  grid_ = grid;
  resize_per_particle(keys_, n);
  resize_per_particle(order_, n);
  for_each_index(n, CellKey{grid, raw(positions), raw(keys_)});
  thrust::sequence(policy(), order_.begin(), order_.end());
  const std::size_t cells = grid.cell_count();
  sort_pairs(std::max(1, static_cast<int>(std::bit_width(cells - 1))));
  // start[c] = first sorted slot whose key is >= c, for c = 0..cells (the last is n): the first
  // slot of each occupied cell, then empty cells take the start of the next occupied one (a
  // minimum scan from the end).
  cell_start_.resize(cells + 1);
  thrust::fill(policy(), cell_start_.begin(), cell_start_.end(), static_cast<std::uint32_t>(n));
  for_each_index(n, MarkCellStarts{raw(keys_), raw(cell_start_)});
  thrust::inclusive_scan(policy(), cell_start_.rbegin(), cell_start_.rend(), cell_start_.rbegin(),
                         Minimum{});
}

std::size_t CellList::device_bytes() const {
  return (keys_.capacity() + order_.capacity() + keys_alt_.capacity() + order_alt_.capacity() +
          cell_start_.capacity()) *
         4;
}

}  // namespace apron
