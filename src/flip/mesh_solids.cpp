#include "flip/mesh_solids.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/common/algorithms.hpp"
#include "kernels/flip/mesh_voxels.hpp"

namespace apron::flip {
namespace {

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
  // corners does. Centres farther than that from the surface keep their side. Where float32
  // cannot resolve 2e-5 of a voxel (a domain far from the origin), such a centre goes by the
  // sign of its float distance.
  //
  // Against the vertical-ray parity this replaces, only centres within 1e-4 voxel of the
  // surface can differ: that parity moved each column 2e-4 voxel off the centre (so a centre
  // nearer the surface than that could land on the wrong side: 18 of 4.2 million voxels of a
  // sphere at 0.005 m, all inside by an exact winding number and now inside), and decided a
  // centre on a horizontal face by the float64 rounding of the crossing height (a box placed
  // with its z faces on voxel-centre planes lost its bottom layer and gained one on top).
  const double s = 2e-5 * grid.dx / std::sqrt(10.0);
  box.nudge[0] = s * std::sqrt(2.0), box.nudge[1] = s * std::sqrt(3.0),
  box.nudge[2] = s * std::sqrt(5.0);
  SolidMask mask;
  for (int d = 0; d < 3; ++d) mask.lo[d] = box.lo[d], mask.dims[d] = box.dims[d];
  DeviceVector<std::uint8_t> solid(box.size(), 0);
  for (const config::MeshShape& m : meshes) {
    surface::SurfaceQuery query;
    query.build(*m.surface);
    mark_voxels_inside(query.view(), box, solid);
  }
  mask.solid.resize(solid.size());
  apron::copy(solid.begin(), solid.end(), mask.solid.begin());
  return mask;
}

}  // namespace apron::flip
