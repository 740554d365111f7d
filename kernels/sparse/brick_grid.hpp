// The geometry of a sparse brick grid (Wu et al. 2018, the GVDB sparse volume): a box of voxels
// of edge dx, cut into bricks of B^3 voxels, of which only those near matter are allocated. Each
// allocated brick sits in a slot and stores (B + 2)^3 values: its interior and an apron one voxel
// wide that mirrors its neighbours (decomposition/brick_halo.hpp fills it). The root of the
// hierarchy is a dense table from brick key to slot (brick_pool.hpp): the domain is a bounded
// tank, so one table of 4 bytes per brick of the domain (128 KiB at 256^3 voxels of 8^3 bricks)
// gives the O(1) lookup, insert and remove for which VDB's upper levels exist in unbounded space.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/common/hd.hpp"
#include "kernels/common/vec.hpp"
#include "kernels/sparse/brick_layout.hpp"

namespace apron {

struct BrickGrid {
  float origin[3] = {0, 0, 0};  // the first voxel's corner
  float dx = 1;                 // voxel edge
  int voxels[3] = {1, 1, 1};    // voxels of the domain per axis
  int bricks[3] = {1, 1, 1};    // bricks per axis: ceil(voxels / B)
  int b = 8;                    // voxels per brick edge (a power of two)

  static constexpr int kApron = 1;
  APRON_HD BrickLayout layout() const { return {b, kApron}; }
  APRON_HD int side() const { return layout().side(); }
  APRON_HD std::size_t stored_per_brick() const { return layout().stored_per_brick(); }
  APRON_HD std::size_t interior_per_brick() const { return layout().interior_per_brick(); }
  std::size_t brick_count() const {
    return static_cast<std::size_t>(bricks[0]) * bricks[1] * bricks[2];
  }

  // Voxel coordinate of x along axis d (strays clamped to the edge voxels; clamped as a float so
  // that far strays cannot overflow the int).
  APRON_HD int voxel_coord(float x, int d) const {
    const float f = floorf((x - origin[d]) / dx);
    const float top = static_cast<float>(voxels[d] - 1);
    return static_cast<int>(f < 0 ? 0.0f : (f > top ? top : f));
  }
  // Position in voxel units: voxel v covers [v, v + 1).
  APRON_HD float grid_coord(float x, int d) const { return (x - origin[d]) / dx; }

  APRON_HD bool inside(int i, int j, int k) const {
    return i >= 0 && j >= 0 && k >= 0 && i < voxels[0] && j < voxels[1] && k < voxels[2];
  }
  // Key of the brick holding voxel (i, j, k), which must be inside the domain.
  APRON_HD std::uint32_t brick_key(int i, int j, int k) const {
    return static_cast<std::uint32_t>(((k / b) * bricks[1] + j / b) * bricks[0] + i / b);
  }
  // The brick coordinates of a key.
  APRON_HD void brick_coords(std::uint32_t key, int c[3]) const {
    c[0] = static_cast<int>(key % static_cast<std::uint32_t>(bricks[0]));
    key /= static_cast<std::uint32_t>(bricks[0]);
    c[1] = static_cast<int>(key % static_cast<std::uint32_t>(bricks[1]));
    c[2] = static_cast<int>(key / static_cast<std::uint32_t>(bricks[1]));
  }
  // Row of voxel (i, j, k), each in [-1, B + 1) relative to the brick's first voxel, in slot's
  // stored values (BrickLayout with an apron of 1).
  APRON_HD std::size_t row(std::size_t slot, int i, int j, int k) const {
    return layout().row(slot, i, j, k);
  }
  // Index of interior voxel (i, j, k) in [0, B)^3 among all slots' interiors: the sort key that
  // groups a slot's particles by voxel.
  APRON_HD std::uint32_t interior_index(std::uint32_t slot, int i, int j, int k) const {
    return static_cast<std::uint32_t>(slot * interior_per_brick() +
                                      (static_cast<std::size_t>(k) * b + j) * b + i);
  }
};

// Solid voxels: outside the domain (the tank's walls), with their centre inside a solid box, or
// marked in a mask (voxelised meshes). Boxes are given in voxel index ranges [lo, hi) per axis.
struct SolidVoxels {
  const int* boxes = nullptr;  // 6 ints per box: lo[3], hi[3]
  int count = 0;
  const std::uint8_t* mask = nullptr;  // voxels [mask_lo, mask_lo + mask_dims), x fastest
  int mask_lo[3] = {0, 0, 0}, mask_dims[3] = {0, 0, 0};

  APRON_HD bool operator()(const BrickGrid& g, int i, int j, int k) const {
    if (!g.inside(i, j, k)) return true;
    for (int s = 0; s < count; ++s) {
      const int* q = boxes + 6 * s;
      if (i >= q[0] && j >= q[1] && k >= q[2] && i < q[3] && j < q[4] && k < q[5]) return true;
    }
    const int x = i - mask_lo[0], y = j - mask_lo[1], z = k - mask_lo[2];
    return mask && x >= 0 && y >= 0 && z >= 0 && x < mask_dims[0] && y < mask_dims[1] &&
           z < mask_dims[2] &&
           mask[(static_cast<std::size_t>(z) * mask_dims[1] + y) * mask_dims[0] + x];
  }
};

}  // namespace apron
