// The cloth's triangle mesh: built and checked on the host from a triangle list, then uploaded
// with each vertex's ordered 1-ring in CSR form, which is all the per-vertex tensor kernels read
// (issue 17: "adjacency lists (CSR)" is the first of the data structures to compare).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cloth/cloth_math.hpp"
#include "kernels/common/backend.hpp"

namespace apron::cloth {

// A mesh as read or generated: positions and counter-clockwise triangles (their normals point to
// the side the curvature signs refer to).
struct HostMesh {
  std::vector<std::array<double, 3>> positions;
  std::vector<std::array<std::uint32_t, 3>> triangles;
};

// Each vertex's neighbours in CSR form: those of v are neighbours[offsets[v] .. offsets[v+1]),
// ordered counter-clockwise around v, so consecutive entries (and, for an interior vertex, the
// last and the first) span one triangle of v. For a boundary vertex the ring is open: it starts
// and ends on the mesh boundary. neighbours[offsets[v]] is v's reference edge, the one its local
// frame is built from (chosen once here, so that the frame follows the material).
struct Rings {
  std::vector<std::uint32_t> offsets;  // vertices + 1
  std::vector<std::uint32_t> neighbours;
  std::vector<std::uint8_t> boundary;  // 1: v lies on the mesh boundary (open ring)
};

// A mesh the cloth cannot use: the message names the triangle, edge or vertex at fault.
class MeshError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The first problem that makes the mesh unusable, or an empty string: a non-finite coordinate,
// a corner index out of range or repeated, a zero-area triangle, an isolated vertex, an edge
// shared by more than two triangles, two triangles that disagree on orientation, a vertex whose
// triangles form more than one fan.
std::string check_mesh(const HostMesh& mesh);

// The ordered 1-rings; throws MeshError with check_mesh's message for a bad mesh.
Rings build_rings(const HostMesh& mesh);

// The vertices within a number of ring steps of one vertex, breadth first (each ring in the order
// its vertices are first reached), the vertex itself excluded. One walker serves many vertices:
// it marks what it reached with a stamp per walk instead of clearing a set.
class RingWalk {
 public:
  explicit RingWalk(const Rings& rings);
  const std::vector<std::uint32_t>& around(std::uint32_t v, int distance);

 private:
  const Rings& rings_;
  std::vector<std::uint32_t> seen_, found_;
  std::uint32_t stamp_ = 0;
};

// A colour per vertex such that no two vertices within `distance` ring steps of each other share
// one (greedy, in vertex order: the same on every rank). Displacing every vertex of one colour
// at once then moves each one's own gradient only by its own displacement, when the gradient at
// a vertex reads `distance` rings: the implicit step's preconditioner probes the Hessian's
// diagonal blocks that way, a few dozen gradients instead of three per vertex.
std::vector<std::uint8_t> distance_colours(const Rings& rings, int distance);

// A rectangular sheet of nx x ny cells in the z = 0 plane, centred on the origin, two triangles
// per cell. Perturbed: each cell's diagonal is chosen at random and interior vertices move by up
// to `jitter` cell widths along x and y, from a seeded generator (the same mesh on every
// platform), so that tests and cases see irregular valences and edge lengths.
struct GridSpec {
  double size_x = 1, size_y = 1;
  int nx = 10, ny = 10;
  bool perturbed = false;
  double jitter = 0.2;
  std::uint64_t seed = 1;
};
HostMesh grid_mesh(const GridSpec& spec);
// Index of grid vertex (i, j), 0 <= i <= nx, 0 <= j <= ny.
inline std::uint32_t grid_vertex(const GridSpec& spec, int i, int j) {
  return static_cast<std::uint32_t>(j * (spec.nx + 1) + i);
}

// A vertex order that keeps neighbours near each other in memory: the vertices sorted by the
// Morton code of their positions (a space-filling curve over the mesh's bounding cube, 10 bits
// per axis, ties in the given order). order[new] = old. A mesh in an arbitrary order (a scan's)
// costs the kernels up to 3x (bench/NOTES.md, "Cloth").
std::vector<std::uint32_t> locality_order(const HostMesh& mesh);
// The mesh with its vertices renumbered: vertex order[k] becomes vertex k.
HostMesh renumbered(const HostMesh& mesh, const std::vector<std::uint32_t>& order);

// The mesh on the device, in scalar T.
template <class T>
struct DeviceMesh {
  DeviceVector<Vector3<T>> positions;
  DeviceVector<std::uint32_t> corners;  // 3 per triangle
  DeviceVector<std::uint32_t> ring_offsets, ring_neighbours;
  DeviceVector<std::uint8_t> boundary;
  // Max's normal weights at the rest positions, per ring entry (vertex_geometry.hpp's RingView).
  DeviceVector<double> spoke_weights, rim_weights;
  std::size_t vertices() const { return positions.size(); }
};

// Sets the mesh's rest positions, rings and the normal weights frozen at those positions.
template <class T>
void upload_rings(const std::vector<std::array<double, 3>>& rest, const Rings& rings,
                  DeviceMesh<T>& out);

// Checks the mesh, builds its rings and uploads both (throws MeshError for a bad mesh).
template <class T>
DeviceMesh<T> upload_mesh(const HostMesh& mesh);

// Positions in scalar T on the device (a deformed copy of the mesh, a reference state).
template <class T>
DeviceVector<Vector3<T>> upload_positions(const std::vector<std::array<double, 3>>& positions);

}  // namespace apron::cloth
