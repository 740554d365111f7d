// The uniform grid every spatial search uses (particle cell lists, triangle bins): its
// placement, a point's cell, and the grid covering a box for neighbours within a radius. The
// cell lists over it are in cell_list.hpp.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/common/box.hpp"
#include "kernels/common/hd.hpp"

namespace apron {

// Cell (i, j, k) covers origin + [i, i+1) * cell along each axis; linear index (k dims[1] + j)
// dims[0] + i, so cells along x are contiguous.
struct GridSpec {
  float origin[3] = {0, 0, 0};
  float cell = 1;
  int dims[3] = {1, 1, 1};
  int reach = 1;  // cells searched on each side: ceil(radius / cell)

  // A grid covering `box` for neighbours within `radius`, with cells of edge radius / divisions.
  static GridSpec covering(const Box& box, double radius, int divisions = 1);
  std::size_t cell_count() const { return static_cast<std::size_t>(dims[0]) * dims[1] * dims[2]; }

  // The cell coordinate of x along axis d, strays clamped to the edge cells. Clamped as a float
  // before the conversion: far strays (or infinities) cannot overflow the int.
  APRON_HD int coord(float x, int d) const {
    const float f = floorf((x - origin[d]) / cell);
    const float top = static_cast<float>(dims[d] - 1);
    return static_cast<int>(f < 0 ? 0.0f : (f > top ? top : f));
  }
  APRON_HD std::uint32_t linear(int cx, int cy, int cz) const {
    return static_cast<std::uint32_t>((cz * dims[1] + cy) * dims[0] + cx);
  }
  // P: anything with float members x, y, z (Vec4, Vec3).
  template <class P>
  APRON_HD std::uint32_t cell_of(const P& p) const {
    return linear(coord(p.x, 0), coord(p.y, 1), coord(p.z, 2));
  }
};

}  // namespace apron
