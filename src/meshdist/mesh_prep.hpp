// Host-side preparation of a mesh for the distance kernels: optional subdivision, its area,
// bounding box and cumulative area (for sampling), and the device copies.
#pragma once

#include <array>
#include <vector>

#include "io/mesh_reader.hpp"
#include "kernels/meshdist/meshdist_kernels.hpp"

namespace apron::meshdist {

// The frame the analysis computes in: coordinates centred on the two meshes' common bounding box
// and divided by its largest extent. Float arithmetic then sees coordinates of order 1 whatever
// the meshes' units: the closest-point test's products (fourth powers of lengths) neither
// overflow for meshes 1e12 across nor underflow for meshes 1e-9 across, and a pair scaled by any
// factor gives the same float coordinates. Distances go back to world units in float64.
struct Frame {
  std::array<double, 3> centre{0, 0, 0};
  double scale = 1;  // world units per local unit (the identity frame: 1)

  Vec4 local(const std::array<double, 3>& v) const;
  std::array<double, 3> world(Vec3 p) const;
};

// The bounding box of a mesh's vertices, float64 as read (unused vertices too: they are samples).
struct Bounds {
  std::array<double, 3> lo{}, hi{};
  double span() const;  // the largest extent
  Bounds merged(const Bounds& other) const;
};
Bounds bounds_of(const io::TriangleMesh& mesh);
// Centred on the box, scaled by its largest extent (by 1 where that is 0).
Frame frame_of(const Bounds& box);

// Splits every edge into k parts: k^2 triangles per triangle, the same surface. Vertices are not
// shared between input triangles (the distance only needs the triangles).
io::TriangleMesh subdivide(const io::TriangleMesh& mesh, int k);

// A mesh as the analysis uses it. Everything is derived from `host` in the same order on every
// rank, so all ranks hold bit-identical copies.
struct PreparedMesh {
  io::TriangleMesh host;  // world coordinates, float64
  Frame frame;            // the device's coordinates: frame.local(host vertex)
  double area = 0;        // in local units (of the float32 corners): frame.scale^2 world units
  double lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};  // of the float32 local coordinates
  std::vector<double> cumulative_area;          // inclusive prefix sum, sequential float64
  // The device copies (after upload()): views of one block of device memory.
  TriangleSoup soup;
  DeviceSpan<const Vec4> vertices;
  DeviceSpan<const double> device_cumulative_area;

  // Host-side quantities, in `frame` (the identity by default).
  explicit PreparedMesh(io::TriangleMesh mesh, const Frame& frame = {});
  double world_area() const { return area * frame.scale * frame.scale; }
  Vec3 local_vertex(std::size_t v) const { return xyz(frame.local(host.vertices[v])); }
  // The device copies: float vertices, corner indices and cumulative areas go over from pinned
  // staging in one transfer (the smallest form of the mesh); the soup is gathered on the device.
  // They take the next device_bytes() of `arena` (the caller's: valid until its next reset), or
  // of the mesh's own.
  std::size_t device_bytes() const;
  void upload(DeviceArena& arena);
  void upload();
  surface::GridGeometry grid_geometry(double cell_factor) const;

 private:
  void stage();
  PinnedBuffer staging_;  // the device block's layout, up to the soup (which is gathered there)
  DeviceArena own_;       // for upload() without an arena
};

}  // namespace apron::meshdist
