// Solid obstacles from closed triangle meshes (issue 15): voxelised once at setup, on the host,
// the same on every rank. A voxel is solid when its centre is inside a mesh: a ray from the centre
// along +z crosses the surface an odd number of times.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/sparse/brick_grid.hpp"

namespace apron::flip {

struct MeshSolid {
  std::string file;  // OBJ, PLY or OFF, as found (the schema resolved the path)
  double scale = 1;
  std::array<double, 3> offset{0, 0, 0};  // applied after the scale
};

// Voxels [lo, lo + dims) of the domain grid, one byte each (x fastest): 1 = solid.
struct SolidMask {
  std::array<int, 3> lo{0, 0, 0}, dims{0, 0, 0};
  std::vector<std::uint8_t> solid;
};

// Voxelises the meshes on `grid` into one mask over the voxels they cover. Throws
// std::runtime_error naming the file when one cannot be read or is not closed.
SolidMask voxelise_meshes(const std::vector<MeshSolid>& meshes, const BrickGrid& grid);

}  // namespace apron::flip
