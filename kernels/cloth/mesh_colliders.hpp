// Cloth against triangle-mesh colliders (a body, a table, a character), static or moved rigidly:
// each vertex is kept `thickness` outside the closed mesh, asked of the surface-query service
// (kernels/surface/). The mesh is built once in its own frame and never refitted: a vertex is
// carried into that frame by the inverse of the collider's pose instead, so a moving collider costs
// no rebuild and its classified empty cells stay valid. The response is the analytic colliders'
// (motion.hpp), relative to the collider's own velocity at the contact point.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cloth/motion.hpp"
#include "kernels/surface/surface_query.hpp"

namespace apron::cloth {

// A rigid pose for the device, in float64: x = pivot + translation + R (X - pivot) for a point X of
// the body at rest (R row-major).
struct BodyPose {
  double rotation[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  double pivot[3] = {0, 0, 0};
  double translation[3] = {0, 0, 0};

  APRON_HD Vector3<double> rotate(Vector3<double> a) const {
    const double* r = rotation;
    return {r[0] * a.x + r[1] * a.y + r[2] * a.z, r[3] * a.x + r[4] * a.y + r[5] * a.z,
            r[6] * a.x + r[7] * a.y + r[8] * a.z};
  }
  APRON_HD Vector3<double> unrotate(Vector3<double> a) const {  // by R^T = R^-1
    const double* r = rotation;
    return {r[0] * a.x + r[3] * a.y + r[6] * a.z, r[1] * a.x + r[4] * a.y + r[7] * a.z,
            r[2] * a.x + r[5] * a.y + r[8] * a.z};
  }
  APRON_HD Vector3<double> apply(Vector3<double> body) const {
    const Vector3<double> p{pivot[0], pivot[1], pivot[2]};
    const Vector3<double> t{translation[0], translation[1], translation[2]};
    return p + t + rotate(body - p);
  }
  APRON_HD Vector3<double> to_body(Vector3<double> x) const {
    const Vector3<double> p{pivot[0], pivot[1], pivot[2]};
    const Vector3<double> t{translation[0], translation[1], translation[2]};
    return p + unrotate(x - p - t);
  }
};

// One mesh collider over one step: the service's view of the mesh at rest, the poses at the start
// and the end of the step (the same for a static one) and its Coulomb coefficient.
struct MeshColliderStep {
  surface::SurfaceView surface;
  BodyPose before, after;
  double friction = 0;
  double thickness = 0;  // contact offset [m]
  double dt = 0;
};

// Where x lies inside the collider grown by `thickness` (at pose `pose`): the outward normal and
// the depth (> 0), and the contact point on the body at rest; depth <= 0 outside. The normal is
// the face's where the closest point lies inside a face, else the direction from the closest
// point (on an edge or a corner) to x, out of the body: pushing x by depth along it puts x at
// `thickness` from the surface, rounding the offset surface at convex edges and corners.
struct MeshContact {
  Contact contact;
  Vector3<double> body_point{0, 0, 0};
  int triangle = -1;  // the closest point's (-1: x not within reach)
};

// The squared distance from q to the grid's box (0 inside it): points farther from it than the
// thickness cannot touch the mesh, and most of a sheet lies there.
APRON_HD inline float beyond_grid2(const surface::GridGeometry& g, Vec3 q) {
  const float p[3] = {q.x, q.y, q.z};
  float d2 = 0;
  for (int d = 0; d < 3; ++d) {
    const float lo = g.origin[d], hi = g.origin[d] + g.dims[d] * g.cell;
    const float e = p[d] < lo ? lo - p[d] : p[d] > hi ? p[d] - hi : 0.0f;
    d2 += e * e;
  }
  return d2;
}
APRON_HD inline MeshContact mesh_contact(const surface::SurfaceView& surface, const BodyPose& pose,
                                         Vector3<double> x, double thickness) {
  const Vector3<double> body = pose.to_body(x);
  const Vec3 q{float(body.x), float(body.y), float(body.z)};
  MeshContact m;
  if (!is_finite(body)) return m;  // a blown-up vertex: the step's check reports it
  const float reach2 = float(thickness * thickness);
  if (beyond_grid2(surface.search.g, q) > reach2) return m;
  // Within reach of the surface: a search of the cells around x only. Found nothing: x is
  // outside, unless its cell says inside or cannot say (then a full search gives the sign).
  surface::SurfaceHit hit = surface.closest(q, reach2);
  if (hit.triangle < 0) {
    if (surface.side_without_search(q) == surface::SurfaceView::kOutside) return m;
    hit = surface.closest(q, surface::kInfinity);
  }
  const double distance = hit.point.w;
  if (hit.triangle < 0 || !(distance < thickness)) return m;
  m.body_point = {hit.point.x, hit.point.y, hit.point.z};
  m.triangle = hit.triangle;
  const Vector3<double> away = body - m.body_point;
  const double length = norm(away);
  // On a face the (float) closest point's round-off would tilt the direction; the face's own
  // normal is exact. On the surface itself there is no direction: the pseudonormal then.
  const Vector3<double> normal =
      hit.feature != surface::kFace && length > 1e-6 * (thickness > 0 ? thickness : 1.0)
          ? (distance < 0 ? -1.0 : 1.0) / length * away
          : Vector3<double>{hit.normal.x, hit.normal.y, hit.normal.z};
  m.contact.normal = pose.rotate(normal);
  m.contact.depth = thickness - distance;
  return m;
}

// Every free vertex of rows [0, count) inside the collider grown by thickness at the end of the
// step is put back on that offset surface, its velocity into the collider (relative to the
// collider's own at the contact point) removed, and friction applied to the sliding part.
void collide_with_mesh(const MeshColliderStep& step, DeviceVector<Vector3<double>>& position,
                       DeviceVector<Vector3<double>>& velocity,
                       const DeviceVector<std::uint8_t>& pinned, std::size_t count);

// depth[i]: how far position[i] lies inside the collider grown by thickness at `pose` (<= 0:
// outside). For the check that a sheet starts outside its colliders.
void mesh_contact_depths(const surface::SurfaceView& surface, const BodyPose& pose,
                         double thickness, const DeviceVector<Vector3<double>>& position,
                         DeviceVector<double>& depth);

}  // namespace apron::cloth
