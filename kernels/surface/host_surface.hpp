// A triangle mesh on the host, as the surface-query service takes it, and what is known of it
// before any device work: its edge topology (closed? consistently wound?), its enclosed volume
// and bounds in float64, and its placement in a case (scale, rotation, offset).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace apron::surface {

// A mesh as the host hands it over: shared vertices (welded) and triangles of vertex indices.
struct HostSurface {
  std::vector<std::array<double, 3>> vertices;
  std::vector<std::array<std::uint32_t, 3>> triangles;
};

// What the edges say about a mesh: closed and consistently oriented when every edge joins
// exactly two triangles that run along it in opposite directions.
struct SurfaceTopology {
  std::size_t edges = 0;
  std::size_t boundary_edges = 0;     // one triangle: an open mesh (a flume without a lid)
  std::size_t nonmanifold_edges = 0;  // three or more triangles
  std::size_t flipped_edges = 0;      // two triangles running the same way: inconsistent winding
  std::array<std::uint32_t, 2> first_bad_edge{0, 0};  // its vertices, for messages
  bool closed() const {
    return boundary_edges == 0 && nonmanifold_edges == 0 && flipped_edges == 0;
  }
};

// Float64 facts of a mesh, on the host: the volume it encloses (negative when its normals point
// inwards) and its bounds.
struct SurfaceMeasures {
  double signed_volume = 0;
  double area = 0;
  std::array<double, 3> lo{}, hi{};
};
SurfaceMeasures measure(const HostSurface& mesh);

// Triangles across each edge and corners around each vertex (what the pseudonormals need).
struct Adjacency {
  SurfaceTopology topology;
  std::vector<int> edge_neighbour;  // triangle across edge e of t at 3t + e, or -1 (open edge)
  std::vector<std::uint32_t> vertex_first, vertex_corners;  // CSR: corners 3t + k around vertex v
};
Adjacency adjacency(const HostSurface& mesh);

// Where a case puts a mesh: scaled about its own origin, rotated by `rotation_degrees` about x,
// then y, then z, then shifted by `offset`.
struct Placement {
  double scale = 1;
  std::array<double, 3> rotation_degrees{0, 0, 0};
  std::array<double, 3> offset{0, 0, 0};

  // The rotation matrix (row-major) and the map of a point of the mesh's file to the case.
  std::array<double, 9> rotation() const;
  std::array<double, 3> apply(const std::array<double, 3>& p) const;
};
HostSurface placed(HostSurface mesh, const Placement& placement);

}  // namespace apron::surface
