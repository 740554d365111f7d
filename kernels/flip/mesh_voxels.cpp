#include "kernels/flip/mesh_voxels.hpp"

namespace apron::flip {
namespace {

struct InsideVoxels {
  surface::SurfaceView surface;
  VoxelBox box;
  std::size_t first;
  std::uint8_t* mask;
  APRON_HD void operator()(std::size_t i) const {
    const std::size_t v = first + i;
    const std::size_t row = v / static_cast<std::size_t>(box.dims[0]);
    const int index[3] = {static_cast<int>(v % static_cast<std::size_t>(box.dims[0])),
                          static_cast<int>(row % static_cast<std::size_t>(box.dims[1])),
                          static_cast<int>(row / static_cast<std::size_t>(box.dims[1]))};
    float c[3];
    for (int d = 0; d < 3; ++d)
      c[d] =
          static_cast<float>(box.origin[d] + (box.lo[d] + index[d] + 0.5) * box.dx + box.nudge[d]);
    if (surface.closest(Vec3{c[0], c[1], c[2]}, surface::kInfinity).point.w < 0) mask[v] = 1;
  }
};

}  // namespace

void mark_voxels_inside(const surface::SurfaceView& surface, const VoxelBox& box, std::size_t first,
                        std::size_t count, DeviceVector<std::uint8_t>& mask) {
  for_each_index(count, InsideVoxels{surface, box, first, raw(mask)});
}

}  // namespace apron::flip
