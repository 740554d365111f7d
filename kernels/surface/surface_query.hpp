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
#include <vector>

#include "kernels/common/backend.hpp"
#include "kernels/common/device_arena.hpp"
#include "kernels/common/vec.hpp"
#include "kernels/surface/host_surface.hpp"
#include "kernels/surface/shell_search.hpp"
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

// What a kernel needs to ask where the surface is: SurfaceQuery::view() of a built service, valid
// until its next build or refit. Device code calls closest() per point.
struct SurfaceView {
  ShellSearch search;
  const std::uint32_t* corner_vertex;
  const Vec4* face_normal;
  const Vec4* edge_normal;
  const Vec4* vertex_normal;
  const std::uint8_t* open_features;  // per triangle, bit f: feature f lies on an open edge
  // Per grid cell: 0 where triangles lie (or unknown), else the side of the surface every point
  // of the cell is on (kOutside, kInside); nullptr until SurfaceQuery::classify_cells().
  const std::uint8_t* cell_side;

  static constexpr std::uint8_t kOutside = 1, kInside = 2;

  // kOutside or kInside where p lies in a cell without triangles (its side is then its cell's),
  // else 0: the answer needs no search.
  APRON_HD std::uint8_t side_without_search(Vec3 p) const {
    if (!cell_side) return 0;
    const GridGeometry& g = search.g;
    const float q[3] = {p.x, p.y, p.z};
    for (int d = 0; d < 3; ++d)
      if (!(q[d] >= g.origin[d] && q[d] < g.origin[d] + g.dims[d] * g.cell)) return kOutside;
    return cell_side[g.cell_of(p)];
  }

  APRON_HD Vec3 pseudonormal(int t, int feature) const {
    if (feature == kFace) return xyz(face_normal[t]);
    if (is_edge(feature)) return xyz(edge_normal[3 * t + (feature - kEdgeAB)]);
    return xyz(vertex_normal[corner_vertex[3 * t + feature]]);
  }

  APRON_HD bool on_open_edge(const SurfaceHit& hit) const {
    return (open_features[hit.triangle] >> hit.feature) & 1;
  }

  // The closest point of the surface to p closer than sqrt(radius2) (kInfinity: any), with its
  // triangle, feature, pseudonormal and signed distance (SurfaceHit); triangle -1 if none.
  APRON_HD SurfaceHit closest(Vec3 p, float radius2) const {
    const float cell2 = search.g.cell * search.g.cell;
    const Nearest n = radius2 <= 4 * cell2 ? search.within_box(p, {radius2, kNoTriangle})
                                           : search.within(p, {radius2, kNoTriangle});
    if (n.triangle == kNoTriangle) return {{p.x, p.y, p.z, kInfinity}, {0, 0, 0, 0}, -1, kFace};
    const int t = n.triangle;
    const Vec3 a = xyz(search.corners[3 * t]);
    const Vec3 ap = p - a;
    int feature = kFace;
    const Vec3 offset = closest_offset_on_triangle(ap, xyz(search.corners[3 * t + 1]) - a,
                                                   xyz(search.corners[3 * t + 2]) - a, feature);
    const Vec3 normal = pseudonormal(t, feature);
    const Vec3 away = ap - offset;
    const float distance = sqrtf(norm2(away));
    const float sign = dot(away, normal) < 0 ? -1.0f : 1.0f;
    return {with_w(a + offset, sign * distance), with_w(normal, 0), t, feature};
  }
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

  SurfaceView view() const;
  // Finds the side of every cell without triangles (a flood from the grid's faces through them:
  // those it reaches are outside, the rest inside), so that inside() and
  // SurfaceView::side_without_search() answer there without a search. For closed meshes only
  // (an open one leaves them unknown); a refit forgets them.
  void classify_cells();

  // Closest point, triangle, feature, pseudonormal and signed distance of every point.
  void closest(DeviceSpan<const Vec4> points, DeviceSpan<SurfaceHit> out) const;
  // The same for points closer than `radius` to the surface; the others get triangle -1. Costs
  // only the cells within the radius: for the points near a wall, every step.
  void closest_within(DeviceSpan<const Vec4> points, float radius,
                      DeviceSpan<SurfaceHit> out) const;
  // 1 where a point is inside the surface (signed distance below zero), else 0. Meaningful for
  // closed meshes (topology().closed()); after classify_cells() a point in a cell without
  // triangles is answered from its cell.
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
  DeviceVector<std::uint8_t> open_features_;
  DeviceVector<std::uint8_t> cell_side_;  // SurfaceView::cell_side; empty: not classified    // per
                                          // triangle: SurfaceView::open_features
  TriangleGrid grid_;
};

}  // namespace apron::surface
