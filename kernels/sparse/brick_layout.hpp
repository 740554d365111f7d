// How a slot of bricks stores its voxels, the one definition the grid, its apron exchange and
// their kernels share: each slot holds (B + 2A)^3 values, its B^3 interior and an apron A voxels
// wide, voxel (i, j, k) in [-A, B + A)^3 with x fastest, slot after slot.
#pragma once

#include <cstddef>

#include "kernels/common/hd.hpp"

namespace apron {

struct BrickLayout {
  int b = 8;  // interior voxels per brick edge
  int a = 1;  // apron width

  APRON_HD int side() const { return b + 2 * a; }
  APRON_HD std::size_t stored_per_brick() const {
    return static_cast<std::size_t>(side()) * side() * side();
  }
  APRON_HD std::size_t interior_per_brick() const { return static_cast<std::size_t>(b) * b * b; }
  // Row of voxel (i, j, k), each in [-A, B + A), of slot `slot`.
  APRON_HD std::size_t row(std::size_t slot, int i, int j, int k) const {
    const std::size_t s = side();
    return slot * stored_per_brick() + (static_cast<std::size_t>(k + a) * s + (j + a)) * s +
           (i + a);
  }
  // The slot and voxel (each coordinate in [-A, B + A)) of stored row t.
  APRON_HD void voxel_of(std::size_t t, std::size_t& slot, int v[3]) const {
    const std::size_t per = stored_per_brick();
    slot = t / per;
    const auto r = static_cast<int>(t - slot * per);
    const int s = side();
    v[0] = r % s - a, v[1] = (r / s) % s - a, v[2] = r / (s * s) - a;
  }
};

}  // namespace apron
