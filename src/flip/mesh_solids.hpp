// Solid obstacles from closed triangle meshes: voxelised once at setup, the same on
// every rank. A voxel is solid when its centre is inside a mesh, as the surface-query service
// answers it on the device (kernels/flip/mesh_voxels.hpp): the sign of the distance to the
// nearest point of the surface. The schema has already refused meshes that are not closed,
// consistently wound and outward-facing (config/mesh_shape.hpp), where that sign means nothing.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "config/mesh_shape.hpp"
#include "kernels/sparse/brick_grid.hpp"

namespace apron::flip {

// Voxels [lo, lo + dims) of the domain grid, one byte each (x fastest): 1 = solid.
struct SolidMask {
  std::array<int, 3> lo{0, 0, 0}, dims{0, 0, 0};
  std::vector<std::uint8_t> solid;
};

// Voxelises the placed meshes on `grid` into one mask over the voxels their bounds cover (within
// the domain).
SolidMask voxelise_meshes(const std::vector<config::MeshShape>& meshes, const BrickGrid& grid);

}  // namespace apron::flip
