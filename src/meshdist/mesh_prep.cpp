#include "meshdist/mesh_prep.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "kernels/common/algorithms.hpp"

namespace apron::meshdist {
namespace {

double triangle_area(const Vec4& a, const Vec4& b, const Vec4& c) {
  const double e1[3] = {double(b.x) - a.x, double(b.y) - a.y, double(b.z) - a.z};
  const double e2[3] = {double(c.x) - a.x, double(c.y) - a.y, double(c.z) - a.z};
  const double cx = e1[1] * e2[2] - e1[2] * e2[1], cy = e1[2] * e2[0] - e1[0] * e2[2],
               cz = e1[0] * e2[1] - e1[1] * e2[0];
  return 0.5 * std::sqrt(cx * cx + cy * cy + cz * cz);
}

}  // namespace

Vec4 Frame::local(const std::array<double, 3>& v) const {
  return {static_cast<float>((v[0] - centre[0]) / scale),
          static_cast<float>((v[1] - centre[1]) / scale),
          static_cast<float>((v[2] - centre[2]) / scale), 0};
}

std::array<double, 3> Frame::world(Vec3 p) const {
  return {centre[0] + p.x * scale, centre[1] + p.y * scale, centre[2] + p.z * scale};
}

double Bounds::span() const {
  return std::max({hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]});
}

Bounds Bounds::merged(const Bounds& other) const {
  Bounds out;
  for (int d = 0; d < 3; ++d) {
    out.lo[d] = std::min(lo[d], other.lo[d]);
    out.hi[d] = std::max(hi[d], other.hi[d]);
  }
  return out;
}

Bounds bounds_of(const io::TriangleMesh& mesh) {
  Bounds box;
  box.lo.fill(std::numeric_limits<double>::infinity());
  box.hi.fill(-std::numeric_limits<double>::infinity());
  for (const auto& v : mesh.vertices)
    for (int d = 0; d < 3; ++d) {
      box.lo[d] = std::min(box.lo[d], v[d]);
      box.hi[d] = std::max(box.hi[d], v[d]);
    }
  return box;
}

Frame frame_of(const Bounds& box) {
  Frame frame;
  // The midpoint as lo + half the extent: (lo + hi) / 2 could overflow where the extent does not.
  for (int d = 0; d < 3; ++d) frame.centre[d] = box.lo[d] + 0.5 * (box.hi[d] - box.lo[d]);
  const double span = box.span();
  frame.scale = span > 0 && std::isfinite(span) ? span : 1.0;
  return frame;
}

io::TriangleMesh subdivide(const io::TriangleMesh& mesh, int k) {
  if (k <= 1) return mesh;
  io::TriangleMesh out;
  out.polygons = mesh.polygons;
  out.degenerate_skipped = mesh.degenerate_skipped;
  const std::size_t per_triangle = static_cast<std::size_t>((k + 1) * (k + 2) / 2);
  out.vertices.reserve(mesh.triangles.size() * per_triangle);
  out.triangles.reserve(mesh.triangles.size() * k * k);
  for (const auto& t : mesh.triangles) {
    const auto& a = mesh.vertices[t[0]];
    const auto& b = mesh.vertices[t[1]];
    const auto& c = mesh.vertices[t[2]];
    const auto base = static_cast<std::uint32_t>(out.vertices.size());
    // Lattice point (i, j) = a + i/k (b - a) + j/k (c - a), i + j <= k, row by row in j.
    auto index = [&](int i, int j) {
      return base + static_cast<std::uint32_t>(j * (k + 1) - j * (j - 1) / 2 + i);
    };
    for (int j = 0; j <= k; ++j)
      for (int i = 0; i + j <= k; ++i) {
        std::array<double, 3> p;
        for (int d = 0; d < 3; ++d) p[d] = a[d] + (b[d] - a[d]) * i / k + (c[d] - a[d]) * j / k;
        out.vertices.push_back(p);
      }
    for (int j = 0; j < k; ++j)
      for (int i = 0; i + j < k; ++i) {
        out.triangles.push_back({index(i, j), index(i + 1, j), index(i, j + 1)});
        if (i + j + 1 < k)
          out.triangles.push_back({index(i + 1, j), index(i + 1, j + 1), index(i, j + 1)});
      }
  }
  return out;
}

namespace {

// Whether the triangle keeps a normal in the float arithmetic of the device (local coordinates,
// of order 1): the squared norm of its edges' cross product must be a normal float. Triangles
// below that (one 1e-10 times the meshes' common extent across, or one that far from the rest)
// have no direction there, and the closest-point test would divide by zero; they are as
// degenerate to the device as zero-area ones are.
bool has_float_normal(const Vec4& a, const Vec4& b, const Vec4& c) {
  const Vec3 e1 = xyz(b) - xyz(a), e2 = xyz(c) - xyz(a);
  const Vec3 n{e1.y * e2.z - e1.z * e2.y, e1.z * e2.x - e1.x * e2.z, e1.x * e2.y - e1.y * e2.x};
  return norm2(n) >= std::numeric_limits<float>::min();
}

// Leaves out the triangles without a float normal, counting them with the zero-area ones.
void drop_float_degenerate(io::TriangleMesh& mesh, const Frame& frame) {
  const auto before = mesh.triangles.size();
  std::erase_if(mesh.triangles, [&](const std::array<std::uint32_t, 3>& t) {
    return !has_float_normal(frame.local(mesh.vertices[t[0]]), frame.local(mesh.vertices[t[1]]),
                             frame.local(mesh.vertices[t[2]]));
  });
  mesh.degenerate_skipped += before - mesh.triangles.size();
  if (mesh.triangles.empty()) {
    char text[400];
    std::snprintf(text, sizeof text,
                  "every triangle is too small for the float arithmetic distances are computed "
                  "in: relative to the two meshes' common extent (%.3g units) its edges' cross "
                  "product underflows; a mesh this much smaller than the other, or this far from "
                  "it, cannot be measured against it",
                  frame.scale);
    throw io::MeshReadError(text);
  }
}

}  // namespace

PreparedMesh::PreparedMesh(io::TriangleMesh mesh, const Frame& frame_in)
    : host(std::move(mesh)), frame(frame_in) {
  drop_float_degenerate(host, frame);
  for (int d = 0; d < 3; ++d) {
    lo[d] = std::numeric_limits<double>::infinity();
    hi[d] = -lo[d];
  }
  for (const auto& v : host.vertices) {
    const Vec4 p = frame.local(v);
    const double f[3] = {p.x, p.y, p.z};
    for (int d = 0; d < 3; ++d) {
      lo[d] = std::min(lo[d], f[d]);
      hi[d] = std::max(hi[d], f[d]);
    }
  }
  cumulative_area.reserve(host.triangles.size());
  for (const auto& t : host.triangles) {
    area += triangle_area(frame.local(host.vertices[t[0]]), frame.local(host.vertices[t[1]]),
                          frame.local(host.vertices[t[2]]));
    cumulative_area.push_back(area);
  }
  stage();
}

namespace {
// Where a mesh's device arrays lie in its block (byte offsets, each DeviceArena-aligned): float
// vertices, corner indices, cumulative areas, then the soup's corners. The pinned staging buffer
// holds the first three at the same offsets, so that one copy uploads them.
struct MeshLayout {
  std::size_t vertices = 0, corners, areas, soup, bytes;
  MeshLayout(std::size_t nv, std::size_t nc) {
    corners = vertices + DeviceArena::bytes_for<Vec4>(nv);
    areas = corners + DeviceArena::bytes_for<std::uint32_t>(nc);
    soup = areas + DeviceArena::bytes_for<double>(nc / 3);
    bytes = soup + DeviceArena::bytes_for<Vec4>(nc);
  }
};
}  // namespace

void PreparedMesh::stage() {
  const std::size_t nv = host.vertices.size(), nc = 3 * host.triangles.size();
  const MeshLayout layout(nv, nc);
  staging_.reserve(layout.soup);
  std::byte* base = staging_.data();
  std::transform(host.vertices.begin(), host.vertices.end(), reinterpret_cast<Vec4*>(base),
                 [&](const std::array<double, 3>& v) { return frame.local(v); });
  auto* corners = reinterpret_cast<std::uint32_t*>(base + layout.corners);
  for (std::size_t t = 0; t < nc / 3; ++t)
    std::copy(host.triangles[t].begin(), host.triangles[t].end(), corners + 3 * t);
  std::copy(cumulative_area.begin(), cumulative_area.end(),
            reinterpret_cast<double*>(base + layout.areas));
}

std::size_t PreparedMesh::device_bytes() const {
  return MeshLayout(host.vertices.size(), 3 * host.triangles.size()).bytes;
}

void PreparedMesh::upload(DeviceArena& arena) {
  const std::size_t nv = host.vertices.size(), nc = 3 * host.triangles.size();
  const MeshLayout layout(nv, nc);
  std::byte* block = arena.take_bytes(layout.bytes);
  apron::copy(staging_.data(), staging_.data() + layout.soup, device_iterator(block));
  vertices = {reinterpret_cast<const Vec4*>(block + layout.vertices), nv};
  device_cumulative_area = {reinterpret_cast<const double*>(block + layout.areas), nc / 3};
  soup = surface::gather_corners(
      vertices, {reinterpret_cast<const std::uint32_t*>(block + layout.corners), nc},
      {reinterpret_cast<Vec4*>(block + layout.soup), nc});
}

void PreparedMesh::upload() {
  own_.reset(device_bytes());
  upload(own_);
}

surface::GridGeometry PreparedMesh::grid_geometry(double cell_factor) const {
  surface::GridOptions options;
  options.cell_factor = cell_factor;
  return surface::choose_grid(lo, hi, area, host.triangles.size(), options);
}

}  // namespace apron::meshdist
