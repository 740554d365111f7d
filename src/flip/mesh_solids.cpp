#include "flip/mesh_solids.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/common/algorithms.hpp"
#include "kernels/flip/mesh_voxels.hpp"

namespace apron::flip {
namespace {

// Voxels asked of the device per launch (4 MiB of mask).
constexpr std::size_t kChunk = std::size_t(1) << 22;

// The voxel range [lo, hi) along each axis that holds the meshes' vertices, clamped to the grid.
VoxelBox mask_box(const std::vector<config::MeshShape>& meshes, const BrickGrid& grid) {
  VoxelBox box;
  std::array<int, 3> hi{0, 0, 0};
  for (int d = 0; d < 3; ++d) {
    box.origin[d] = grid.origin[d];
    box.lo[d] = grid.voxels[d];
  }
  box.dx = grid.dx;
  for (const config::MeshShape& m : meshes)
    for (const auto& p : m.surface->vertices)
      for (int d = 0; d < 3; ++d) {
        const double f = std::floor((p[d] - grid.origin[d]) / grid.dx);
        const int v = static_cast<int>(std::clamp(f, 0.0, static_cast<double>(grid.voxels[d])));
        box.lo[d] = std::min(box.lo[d], v);
        hi[d] = std::max(hi[d], v + 1);
      }
  for (int d = 0; d < 3; ++d)
    box.dims[d] = std::max(0, std::min(hi[d], grid.voxels[d]) - box.lo[d]);
  return box;
}

}  // namespace

SolidMask voxelise_meshes(const std::vector<config::MeshShape>& meshes, const BrickGrid& grid) {
  VoxelBox box = mask_box(meshes, grid);
  // A centre on the surface (a mesh drawn on voxel-centre planes) is decided by moving it 2e-5
  // of a voxel along an irrational direction, off every face of a mesh on round coordinates: a
  // box mesh then holds the centres in [lo, hi) along each axis, as the same box given by its
  // corners does (and as the vertical-ray parity this replaces did). Centres further than that
  // from the surface are not moved across it. Where float32 cannot resolve 2e-5 of a voxel (a
  // domain far from the origin), such a centre goes by the sign of its float distance.
  const double s = 2e-5 * grid.dx / std::sqrt(10.0);
  box.nudge[0] = s * std::sqrt(2.0), box.nudge[1] = s * std::sqrt(3.0),
  box.nudge[2] = s * std::sqrt(5.0);
  SolidMask mask;
  for (int d = 0; d < 3; ++d) mask.lo[d] = box.lo[d], mask.dims[d] = box.dims[d];
  DeviceVector<std::uint8_t> solid(box.size(), 0);
  for (const config::MeshShape& m : meshes) {
    surface::SurfaceQuery query;
    query.build(*m.surface);
    const surface::SurfaceView view = query.view();
    for (std::size_t first = 0; first < box.size(); first += kChunk)
      mark_voxels_inside(view, box, first, std::min(kChunk, box.size() - first), solid);
  }
  mask.solid.resize(solid.size());
  apron::copy(solid.begin(), solid.end(), mask.solid.begin());
  return mask;
}

}  // namespace apron::flip
