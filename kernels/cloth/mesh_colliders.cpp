#include "kernels/cloth/mesh_colliders.hpp"

#include "kernels/common/primitives.hpp"

namespace apron::cloth {
namespace {

using V3 = Vector3<double>;

struct MeshCollideKernel {
  V3* x;
  V3* v;
  const std::uint8_t* pinned;
  MeshColliderStep step;

  APRON_HD void operator()(std::size_t i) const {
    if (pinned[i]) return;
    const MeshContact m = mesh_contact(step.surface, step.after, x[i], step.thickness);
    if (m.contact.depth <= 0) return;
    // The collider's velocity where the vertex touches it, over this step.
    const V3 wall_velocity =
        (1.0 / step.dt) * (step.after.apply(m.body_point) - step.before.apply(m.body_point));
    V3 xi = x[i], vi = v[i];
    respond_to_contact(m.contact, wall_velocity, step.friction, step.dt, xi, vi);
    x[i] = xi;
    v[i] = vi;
  }
};

struct DepthKernel {
  const V3* x;
  double* depth;
  surface::SurfaceView surface;
  BodyPose pose;
  double thickness;
  APRON_HD void operator()(std::size_t i) const {
    depth[i] = mesh_contact(surface, pose, x[i], thickness).contact.depth;
  }
};

}  // namespace

void collide_with_mesh(const MeshColliderStep& step, DeviceVector<V3>& position,
                       DeviceVector<V3>& velocity, const DeviceVector<std::uint8_t>& pinned,
                       std::size_t count) {
  for_each_index(count, MeshCollideKernel{raw(position), raw(velocity), raw(pinned), step});
}

void mesh_contact_depths(const surface::SurfaceView& surface, const BodyPose& pose,
                         double thickness, const DeviceVector<V3>& position,
                         DeviceVector<double>& depth) {
  depth.resize(position.size());
  for_each_index(position.size(), DepthKernel{raw(position), raw(depth), surface, pose, thickness});
}

}  // namespace apron::cloth
