// The surface-query service: "where is the surface" for every workload that meets one (meshdist's
// distances, FLIP's mesh solids, SPH's mesh walls, cloth's colliders). A triangle mesh lives on
// the device with its pseudonormals and the triangle grid over it, and answers in batches:
// closest point (with its triangle and feature), signed distance, inside/outside and ray hits.
//
// Signs come from angle-weighted pseudonormals (Baerentzen & Aanaes 2005): the normal of the
// feature that holds the closest point (a face's normal; the sum of the two faces' normals at an
// edge; the angle-weighted sum at a vertex). For a closed, consistently oriented mesh this sign
// is exact next to edges and vertices of non-convex parts, where the face normal of the nearest
// triangle is wrong. Positive distances lie on the side the normals point to ("outside").
//
// The structure is the uniform triangle grid of kernels/surface/triangle_grid.hpp, chosen over a
// BVH because its build is one sort (so a moving mesh is tracked by building again, exactly)
// and its search is the one meshdist was tuned on.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/backend.hpp"
#include "kernels/common/device_arena.hpp"
#include "kernels/common/vec.hpp"
#include "kernels/surface/host_surface.hpp"
#include "kernels/surface/triangle_grid.hpp"

namespace apron::surface {

// The answer for one query point. point.w is the signed distance; normal is the unit
// pseudonormal of the feature (TriangleFeature) of triangle `triangle` that holds the point.
// triangle is -1 where a search within a radius found nothing.
struct SurfaceHit {
  Vec4 point;
  Vec4 normal;
  int triangle;
  int feature;
};

// The first crossing of a ray: parameter t along origin + t direction, and the triangle
// (t = infinity and triangle -1: none up to t_max).
struct RayHit {
  float t;
  int triangle;
};

class SurfaceQuery {
 public:
  // Uploads the mesh, finds its edge topology, computes its pseudonormals and builds the grid.
  void build(const HostSurface& mesh, const GridOptions& options = {});
  // The same triangles at new vertex positions (a moving or deforming mesh): pseudonormals and
  // grid are computed again from the device positions, so answers track the mesh exactly.
  void refit(DeviceSpan<const Vec4> vertices);

  const SurfaceTopology& topology() const { return topology_; }
  std::size_t vertex_count() const { return vertices_.size(); }
  std::size_t triangle_count() const { return corner_vertex_.size() / 3; }
  const TriangleGrid& grid() const { return grid_; }
  TriangleSoup soup() const { return {DeviceSpan<const Vec4>(corners_)}; }
  DeviceSpan<const Vec4> vertices() const { return vertices_; }

  // Closest point, triangle, feature, pseudonormal and signed distance of every point.
  void closest(DeviceSpan<const Vec4> points, DeviceSpan<SurfaceHit> out) const;
  // The same for points closer than `radius` to the surface; the others get triangle -1. Costs
  // only the cells within the radius: for the points near a wall, every step.
  void closest_within(DeviceSpan<const Vec4> points, float radius,
                      DeviceSpan<SurfaceHit> out) const;
  // 1 where a point is inside the surface (signed distance below zero), else 0. Meaningful for
  // closed meshes (topology().closed()).
  void inside(DeviceSpan<const Vec4> points, DeviceSpan<std::uint8_t> out) const;
  // The nearest crossing of every ray origin + t direction with 0 <= t <= t_max, walking the
  // grid's cells along the ray (ties: the lower triangle index).
  void ray_hits(DeviceSpan<const Vec4> origins, DeviceSpan<const Vec4> directions, float t_max,
                DeviceSpan<RayHit> out) const;

 private:
  void compute_normals();

  GridOptions options_;
  double area_ = 0;  // sets the grid's cell size, which a rigid motion keeps
  SurfaceTopology topology_;
  DeviceVector<Vec4> vertices_;
  DeviceVector<std::uint32_t> corner_vertex_;   // 3 per triangle
  DeviceVector<int> edge_neighbour_;            // triangle across edge e of t at 3t + e, or -1
  DeviceVector<std::uint32_t> vertex_first_;    // corners around vertex v: [first[v], first[v+1])
  DeviceVector<std::uint32_t> vertex_corners_;  // 3t + k for corner k of triangle t
  DeviceVector<Vec4> corners_;                  // the triangle soup the grid searches
  DeviceVector<Vec4> face_normal_;              // unit, per triangle
  DeviceVector<Vec4> edge_normal_;              // unit, 3 per triangle
  DeviceVector<Vec4> vertex_normal_;            // unit, per vertex
  TriangleGrid grid_;
};

}  // namespace apron::surface
