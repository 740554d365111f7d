#include "kernels/flip/mesh_voxels.hpp"

#include <cmath>

namespace apron::flip {
namespace {

// Block edges, in voxels, coarse to fine; the last is the voxel itself.
constexpr int kLevels[] = {16, 4, 1};

// The blocks of `size`^3 voxels that tile a box (the last along an axis may be smaller).
struct Blocks {
  int size;
  int count[3];
  APRON_HD std::size_t total() const {
    return static_cast<std::size_t>(count[0]) * count[1] * count[2];
  }
};

Blocks blocks_of(const VoxelBox& box, int size) {
  Blocks b{size, {0, 0, 0}};
  for (int d = 0; d < 3; ++d) b.count[d] = (box.dims[d] + size - 1) / size;
  return b;
}

// The centre of block (i, j, k) of `blocks` (a voxel's: nudged), in float64.
APRON_HD inline void block_centre(const VoxelBox& box, const Blocks& blocks, const int index[3],
                                  double c[3]) {
  for (int d = 0; d < 3; ++d) {
    const int first = index[d] * blocks.size;
    const int last =
        first + blocks.size - 1 < box.dims[d] - 1 ? first + blocks.size - 1 : box.dims[d] - 1;
    c[d] = box.origin[d] + (box.lo[d] + 0.5 * (first + last) + 0.5) * box.dx;
    if (blocks.size == 1) c[d] += box.nudge[d];
  }
}

APRON_HD inline void unflatten(std::size_t n, const int count[3], int index[3]) {
  const std::size_t row = n / static_cast<std::size_t>(count[0]);
  index[0] = static_cast<int>(n % static_cast<std::size_t>(count[0]));
  index[1] = static_cast<int>(row % static_cast<std::size_t>(count[1]));
  index[2] = static_cast<int>(row / static_cast<std::size_t>(count[1]));
}

// What is known of the surface's distance from the centre of each block of one level: two
// floats per block, a lower bound signed as the side the centre is on, and an upper bound. A
// block the search asked holds its distance twice; one its enclosing block decided (the
// surface farther from the enclosing centre than from this one, by the gap between them) holds
// the enclosing block's bounds less and plus that gap, unasked. At the voxel level, the mask.
struct Probe {
  surface::SurfaceView surface;
  VoxelBox box;
  Blocks blocks, parents;
  const float* parent_reach;  // null at the top level
  float margin;
  std::size_t first;
  float* reach;        // per block; null at the voxel level
  std::uint8_t* mask;  // at the voxel level
  APRON_HD void operator()(std::size_t i) const {
    const std::size_t n = first + i;
    int index[3];
    unflatten(n, blocks.count, index);
    double c[3];
    block_centre(box, blocks, index, c);
    float lower, upper;
    float radius2 = surface::kInfinity;
    bool asked = true;
    if (parent_reach) {
      int parent[3];
      double pc[3], gap2 = 0;
      for (int d = 0; d < 3; ++d) parent[d] = index[d] * blocks.size / parents.size;
      block_centre(box, parents, parent, pc);
      for (int d = 0; d < 3; ++d) gap2 += (c[d] - pc[d]) * (c[d] - pc[d]);
      const float gap = static_cast<float>(sqrt(gap2));
      const std::size_t p =
          (static_cast<std::size_t>(parent[2]) * parents.count[1] + parent[1]) * parents.count[0] +
          parent[0];
      const float parent_lower = parent_reach[2 * p], parent_upper = parent_reach[2 * p + 1];
      if (fabsf(parent_lower) > gap + margin) {
        lower = parent_lower < 0 ? parent_lower + gap : parent_lower - gap;
        upper = parent_upper + gap;
        asked = false;
      } else {
        radius2 = (parent_upper + gap + margin) * (parent_upper + gap + margin);
      }
    }
    if (asked) {
      const Vec3 p{static_cast<float>(c[0]), static_cast<float>(c[1]), static_cast<float>(c[2])};
      surface::SurfaceHit hit = surface.closest(p, radius2);
      if (hit.triangle < 0) hit = surface.closest(p, surface::kInfinity);  // round-off only
      lower = hit.point.w;
      upper = fabsf(hit.point.w);
    }
    if (reach) {
      reach[2 * n] = lower;
      reach[2 * n + 1] = upper;
    } else if (lower < 0) {
      mask[n] = 1;
    }
  }
};

}  // namespace

void mark_voxels_inside(const surface::SurfaceView& surface, const VoxelBox& box,
                        DeviceVector<std::uint8_t>& mask, std::size_t chunk) {
  if (box.size() == 0) return;
  const float margin = static_cast<float>(0.01 * box.dx);
  DeviceVector<float> parent_reach, reach;
  Blocks parents{0, {0, 0, 0}};
  for (const int size : kLevels) {
    const Blocks blocks = blocks_of(box, size);
    const bool voxels = size == 1;
    if (!voxels) reach.resize(2 * blocks.total());
    for (std::size_t first = 0; first < blocks.total(); first += chunk) {
      const std::size_t n = blocks.total() - first < chunk ? blocks.total() - first : chunk;
      for_each_index(
          n, Probe{surface, box, blocks, parents, parents.size ? raw(parent_reach) : nullptr,
                   margin, first, voxels ? nullptr : raw(reach), raw(mask)});
    }
    parents = blocks;
    parent_reach.swap(reach);
  }
}

}  // namespace apron::flip
