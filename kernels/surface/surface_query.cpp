#include "kernels/surface/surface_query.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/common/algorithms.hpp"

namespace apron::surface {
namespace {

// Per triangle, bit f set where feature f lies on an open edge (an edge of one triangle, or a
// vertex of one): there the surface ends, and a point beyond it is on neither side.
std::vector<std::uint8_t> open_features_of(const HostSurface& mesh, const Adjacency& adj) {
  std::vector<std::uint8_t> open_vertex(mesh.vertices.size(), 0), mask(mesh.triangles.size(), 0);
  for (std::size_t t = 0; t < mesh.triangles.size(); ++t)
    for (int e = 0; e < 3; ++e)
      if (adj.edge_neighbour[3 * t + e] < 0) {
        mask[t] |= std::uint8_t(1u << (kEdgeAB + e));
        open_vertex[mesh.triangles[t][e]] = open_vertex[mesh.triangles[t][(e + 1) % 3]] = 1;
      }
  for (std::size_t t = 0; t < mesh.triangles.size(); ++t)
    for (int k = 0; k < 3; ++k)
      if (open_vertex[mesh.triangles[t][k]]) mask[t] |= std::uint8_t(1u << (kVertexA + k));
  return mask;
}

// ---- Pseudonormals (device, after every build or refit) --------------------------------------

struct FaceNormals {
  const Vec4* corners;
  Vec4* normal;
  APRON_HD void operator()(std::size_t t) const {
    const Vec3 a = xyz(corners[3 * t]), b = xyz(corners[3 * t + 1]), c = xyz(corners[3 * t + 2]);
    normal[t] = with_w(normalized(cross(b - a, c - a)), 0);
  }
};

// An edge's pseudonormal: the sum of its two faces' normals (one face at an open edge).
struct EdgeNormals {
  const Vec4* face_normal;
  const int* neighbour;
  Vec4* normal;
  APRON_HD void operator()(std::size_t edge) const {
    const Vec3 own = xyz(face_normal[edge / 3]);
    const int other = neighbour[edge];
    normal[edge] = with_w(normalized(own + (other >= 0 ? xyz(face_normal[other]) : own)), 0);
  }
};

// A vertex's pseudonormal: its faces' normals weighted by their angles at the vertex.
struct VertexNormals {
  const Vec4* corners;
  const Vec4* face_normal;
  const std::uint32_t* first;
  const std::uint32_t* around;
  Vec4* normal;
  APRON_HD void operator()(std::size_t v) const {
    Vec3 sum{0, 0, 0};
    for (std::uint32_t i = first[v]; i < first[v + 1]; ++i) {
      const std::uint32_t corner = around[i], t = corner / 3, k = corner % 3;
      const Vec3 p = xyz(corners[corner]);
      const Vec3 u = xyz(corners[3 * t + (k + 1) % 3]) - p,
                 w = xyz(corners[3 * t + (k + 2) % 3]) - p;
      const float angle = atan2f(sqrtf(norm2(cross(u, w))), dot(u, w));
      sum += angle * xyz(face_normal[t]);
    }
    normal[v] = with_w(normalized(sum), 0);
  }
};

struct Bounds {
  float lo[3], hi[3];
};
struct BoundsOfVertex {
  const Vec4* vertices;
  APRON_HD Bounds operator()(std::size_t i) const {
    const Vec4 p = vertices[i];
    return {{p.x, p.y, p.z}, {p.x, p.y, p.z}};
  }
};
struct CombineBounds {
  APRON_HD Bounds operator()(const Bounds& a, const Bounds& b) const {
    Bounds out;
    for (int d = 0; d < 3; ++d) {
      out.lo[d] = fminf(a.lo[d], b.lo[d]);
      out.hi[d] = fmaxf(a.hi[d], b.hi[d]);
    }
    return out;
  }
};

// ---- Queries ---------------------------------------------------------------------------------

struct ClosestOfPoints {
  SurfaceView query;
  const Vec4* points;
  float radius2;
  SurfaceHit* out;
  APRON_HD void operator()(std::size_t i) const { out[i] = query.closest(xyz(points[i]), radius2); }
};

struct InsideOfPoints {
  SurfaceView query;
  const Vec4* points;
  std::uint8_t* out;
  APRON_HD void operator()(std::size_t i) const {
    const Vec3 p = xyz(points[i]);
    const std::uint8_t side = query.side_without_search(p);
    if (side) {
      out[i] = side == SurfaceView::kInside ? 1 : 0;
      return;
    }
    out[i] = query.closest(p, kInfinity).point.w < 0 ? 1 : 0;
  }
};

// Amanatides & Woo's walk through the grid's cells along each ray, testing the triangles of each
// cell, until the nearest hit so far lies before the next cell.
struct RayWalk {
  GridGeometry g;
  const Vec4* corners;
  const std::uint32_t* cell_start;
  const std::uint32_t* cell_triangles;
  const Vec4* origins;
  const Vec4* directions;
  float t_max;
  RayHit* out;

  APRON_HD void visit(int cell, Vec3 o, Vec3 d, RayHit& best) const {
    for (std::uint32_t n = cell_start[cell]; n < cell_start[cell + 1]; ++n) {
      const int t = static_cast<int>(cell_triangles[n]);
      const float s =
          ray_triangle(o, d, xyz(corners[3 * t]), xyz(corners[3 * t + 1]), xyz(corners[3 * t + 2]));
      if (s >= 0 && s <= t_max && (s < best.t || (s == best.t && t < best.triangle))) best = {s, t};
    }
  }

  APRON_HD void operator()(std::size_t i) const {
    const Vec3 o = xyz(origins[i]), d = xyz(directions[i]);
    RayHit best{kInfinity, -1};
    const float q[3] = {o.x, o.y, o.z}, v[3] = {d.x, d.y, d.z};
    float enter = 0, leave = t_max;
    for (int a = 0; a < 3; ++a) {  // clip to the grid's box
      const float lo = g.origin[a] - g.margin, hi = g.origin[a] + g.dims[a] * g.cell + g.margin;
      if (v[a] == 0) {
        if (q[a] < lo || q[a] > hi) enter = kInfinity;
        continue;
      }
      float t0 = (lo - q[a]) / v[a], t1 = (hi - q[a]) / v[a];
      if (t0 > t1) {
        const float s = t0;
        t0 = t1;
        t1 = s;
      }
      enter = fmaxf(enter, t0);
      leave = fminf(leave, t1);
    }
    if (!(enter <= leave)) {
      out[i] = best;
      return;
    }
    int c[3], step[3];
    float next[3], delta[3];
    for (int a = 0; a < 3; ++a) {
      c[a] = g.coord(q[a] + enter * v[a], a);
      step[a] = v[a] > 0 ? 1 : -1;
      delta[a] = v[a] != 0 ? g.cell / fabsf(v[a]) : kInfinity;
      const float boundary = g.origin[a] + (c[a] + (v[a] > 0 ? 1 : 0)) * g.cell;
      next[a] = v[a] != 0 ? (boundary - q[a]) / v[a] : kInfinity;
    }
    const float slack = g.margin / sqrtf(norm2(d));
    for (;;) {
      visit(static_cast<int>(g.linear(c[0], c[1], c[2])), o, d, best);
      const int a =
          next[0] <= next[1] ? (next[0] <= next[2] ? 0 : 2) : (next[1] <= next[2] ? 1 : 2);
      if (best.t <= next[a] + slack || next[a] > leave) break;
      c[a] += step[a];
      if (c[a] < 0 || c[a] >= g.dims[a]) break;
      next[a] += delta[a];
    }
    out[i] = best;
  }
};

void check_sizes(std::size_t queries, std::size_t outputs, const char* what) {
  if (outputs < queries)
    throw std::invalid_argument(std::string("SurfaceQuery::") + what +
                                ": fewer outputs than queries");
}

}  // namespace

void SurfaceQuery::build(const HostSurface& mesh, const GridOptions& options) {
  if (mesh.triangles.empty()) throw std::invalid_argument("SurfaceQuery: a mesh without triangles");
  for (const auto& t : mesh.triangles)
    for (std::uint32_t v : t)
      if (v >= mesh.vertices.size())
        throw std::invalid_argument("SurfaceQuery: a triangle names vertex " + std::to_string(v) +
                                    " of " + std::to_string(mesh.vertices.size()));
  options_ = options;
  area_ = measure(mesh).area;
  Adjacency adj = adjacency(mesh);
  topology_ = adj.topology;
  std::vector<Vec4> vertices(mesh.vertices.size());
  for (std::size_t i = 0; i < vertices.size(); ++i)
    vertices[i] = {static_cast<float>(mesh.vertices[i][0]), static_cast<float>(mesh.vertices[i][1]),
                   static_cast<float>(mesh.vertices[i][2]), 0};
  std::vector<std::uint32_t> corner_vertex(3 * mesh.triangles.size());
  for (std::size_t t = 0; t < mesh.triangles.size(); ++t)
    for (int k = 0; k < 3; ++k) corner_vertex[3 * t + k] = mesh.triangles[t][k];
  to_device(corner_vertex, corner_vertex_);
  to_device(adj.edge_neighbour, edge_neighbour_);
  to_device(adj.vertex_first, vertex_first_);
  to_device(adj.vertex_corners, vertex_corners_);
  to_device(open_features_of(mesh, adj), open_features_);
  to_device(vertices, vertices_);
  refit(vertices_);
}

void SurfaceQuery::refit(DeviceSpan<const Vec4> vertices) {
  if (vertices.size() != vertex_count() && !vertices_.empty())
    throw std::invalid_argument("SurfaceQuery::refit: " + std::to_string(vertices.size()) +
                                " vertices for a mesh of " + std::to_string(vertex_count()));
  const std::size_t nv = vertices.size(), nt = corner_vertex_.size() / 3;
  if (vertices.data() != raw(vertices_)) {
    vertices_.resize(nv);
    copy_n(device_iterator(vertices.data()), nv, device_iterator(raw(vertices_)));
  }
  corners_.resize(3 * nt);
  gather_corners(vertices_, corner_vertex_, DeviceSpan<Vec4>(raw(corners_), corners_.size()));
  compute_normals();
  const Bounds empty{{kInfinity, kInfinity, kInfinity}, {-kInfinity, -kInfinity, -kInfinity}};
  const Bounds b = transform_reduce(nv, BoundsOfVertex{raw(vertices_)}, empty, CombineBounds{});
  const double lo[3] = {b.lo[0], b.lo[1], b.lo[2]}, hi[3] = {b.hi[0], b.hi[1], b.hi[2]};
  grid_.build(soup(), choose_grid(lo, hi, area_, nt, options_));
  cell_side_.clear();  // the cells' sides are the old mesh's
}

void SurfaceQuery::compute_normals() {
  const std::size_t nt = corner_vertex_.size() / 3, nv = vertices_.size();
  face_normal_.resize(nt);
  edge_normal_.resize(3 * nt);
  vertex_normal_.resize(nv);
  for_each_index(nt, FaceNormals{raw(corners_), raw(face_normal_)});
  for_each_index(3 * nt, EdgeNormals{raw(face_normal_), raw(edge_neighbour_), raw(edge_normal_)});
  for_each_index(nv, VertexNormals{raw(corners_), raw(face_normal_), raw(vertex_first_),
                                   raw(vertex_corners_), raw(vertex_normal_)});
}

SurfaceView SurfaceQuery::view() const {
  return {shell_search(grid_, soup()),
          raw(corner_vertex_),
          raw(face_normal_),
          raw(edge_normal_),
          raw(vertex_normal_),
          raw(open_features_),
          cell_side_.empty() ? nullptr : raw(cell_side_)};
}

void SurfaceQuery::classify_cells() {
  cell_side_.clear();
  if (!topology_.closed()) return;
  const GridGeometry& g = grid_.geometry();
  const std::size_t cells = g.cell_count();
  std::vector<std::uint32_t> start(cells + 1);
  detail::copy_to_host(grid_.cell_start(), cells + 1, start.data());
  // Every cell a triangle touches holds it, so a flood through face-adjacent empty cells never
  // crosses the surface.
  std::vector<std::uint8_t> side(cells, 0);
  std::vector<std::uint32_t> frontier;
  auto reach = [&](int i, int j, int k) {
    const std::uint32_t c = g.linear(i, j, k);
    if (side[c] == 0 && start[c + 1] == start[c]) {
      side[c] = SurfaceView::kOutside;
      frontier.push_back(c);
    }
  };
  const int nx = g.dims[0], ny = g.dims[1], nz = g.dims[2];
  for (int k = 0; k < nz; ++k)
    for (int j = 0; j < ny; ++j)
      for (int i = 0; i < nx; ++i)
        if (i == 0 || j == 0 || k == 0 || i == nx - 1 || j == ny - 1 || k == nz - 1) reach(i, j, k);
  while (!frontier.empty()) {
    const std::uint32_t c = frontier.back();
    frontier.pop_back();
    const int i = static_cast<int>(c % nx), j = static_cast<int>(c / nx % ny),
              k = static_cast<int>(c / nx / ny);
    if (i > 0) reach(i - 1, j, k);
    if (i + 1 < nx) reach(i + 1, j, k);
    if (j > 0) reach(i, j - 1, k);
    if (j + 1 < ny) reach(i, j + 1, k);
    if (k > 0) reach(i, j, k - 1);
    if (k + 1 < nz) reach(i, j, k + 1);
  }
  for (std::size_t c = 0; c < cells; ++c)
    if (side[c] == 0 && start[c + 1] == start[c]) side[c] = SurfaceView::kInside;
  to_device(side, cell_side_);
}

void SurfaceQuery::closest(DeviceSpan<const Vec4> points, DeviceSpan<SurfaceHit> out) const {
  closest_within(points, kInfinity, out);
}

void SurfaceQuery::closest_within(DeviceSpan<const Vec4> points, float radius,
                                  DeviceSpan<SurfaceHit> out) const {
  check_sizes(points.size(), out.size(), "closest");
  const SurfaceView query = view();
  for_each_index(points.size(), ClosestOfPoints{query, points.data(), radius * radius, out.data()});
}

void SurfaceQuery::inside(DeviceSpan<const Vec4> points, DeviceSpan<std::uint8_t> out) const {
  check_sizes(points.size(), out.size(), "inside");
  const SurfaceView query = view();
  for_each_index(points.size(), InsideOfPoints{query, points.data(), out.data()});
}

void SurfaceQuery::ray_hits(DeviceSpan<const Vec4> origins, DeviceSpan<const Vec4> directions,
                            float t_max, DeviceSpan<RayHit> out) const {
  check_sizes(origins.size(), out.size(), "ray_hits");
  check_sizes(origins.size(), directions.size(), "ray_hits");
  for_each_index(origins.size(), RayWalk{grid_.geometry(), raw(corners_), grid_.cell_start(),
                                         grid_.cell_triangles(), origins.data(), directions.data(),
                                         t_max, out.data()});
}

}  // namespace apron::surface
