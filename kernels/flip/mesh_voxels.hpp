// FLIP's solids from closed triangle meshes: which voxel centres of a box of the domain grid lie
// inside a mesh, asked of the surface-query service (the sign of the distance to the nearest
// point of the surface, by its pseudonormal).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/backend.hpp"
#include "kernels/surface/surface_query.hpp"

namespace apron::flip {

// Voxels [lo, lo + dims) of a grid of voxel edge dx whose first voxel's corner is `origin`,
// indexed x fastest. Each centre is moved by `nudge` (a tie-break for centres on the surface)
// in float64, then asked in float32.
struct VoxelBox {
  double origin[3] = {0, 0, 0};
  double dx = 1;
  int lo[3] = {0, 0, 0}, dims[3] = {0, 0, 0};
  double nudge[3] = {0, 0, 0};
  std::size_t size() const { return static_cast<std::size_t>(dims[0]) * dims[1] * dims[2]; }
};

// mask[v] = 1 for the voxels v in [first, first + count) of `box` whose centre is inside the
// surface (mask holds box.size() bytes); the others are left as they are, so several meshes
// mark one mask.
void mark_voxels_inside(const surface::SurfaceView& surface, const VoxelBox& box, std::size_t first,
                        std::size_t count, DeviceVector<std::uint8_t>& mask);

}  // namespace apron::flip
