// Host-side preparation of a mesh for the distance kernels: optional subdivision, its area,
// bounding box and cumulative area (for sampling), and the device copies.
#pragma once

#include <array>
#include <vector>

#include "io/mesh_reader.hpp"
#include "kernels/meshdist/meshdist_kernels.hpp"

namespace apron::meshdist {

// Splits every edge into k parts: k^2 triangles per triangle, the same surface. Vertices are not
// shared between input triangles (the distance only needs the triangles).
io::TriangleMesh subdivide(const io::TriangleMesh& mesh, int k);

// A mesh as the analysis uses it. Everything is derived from `host` in the same order on every
// rank, so all ranks hold bit-identical copies.
struct PreparedMesh {
  io::TriangleMesh host;
  double area = 0;
  double lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};  // of the float32 coordinates
  std::vector<double> cumulative_area;          // inclusive prefix sum, sequential float64
  TriangleSoup soup;
  DeviceVector<Vec4> vertices;
  DeviceVector<double> device_cumulative_area;

  explicit PreparedMesh(io::TriangleMesh mesh);  // host-side quantities
  // The device copies: float vertices, corner indices and cumulative areas go over from pinned
  // staging (the smallest form of the mesh); the soup is gathered on the device.
  void upload();
  GridGeometry grid_geometry(double cell_factor) const;

 private:
  void stage();
  PinnedBuffer staging_;  // float vertices, then corner indices, then cumulative areas
  DeviceVector<std::uint32_t> corner_vertex_;
};

}  // namespace apron::meshdist
