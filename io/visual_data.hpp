// What a workload shows in situ (ARCHITECTURE.md, "I/O"): pieces of this rank's data in host
// memory, described without VTK so that only io/catalyst_adaptor.cpp sees ParaView. The adaptor
// wraps the arrays without copying them, so they must stay alive and unchanged until the
// Catalyst call that received them returns.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/host_field.hpp"

namespace apron::io {

// One dataset of one Catalyst channel on this rank (its piece of the global dataset).
//   points: particles; the 3-component float or double "position" field is the geometry and
//           becomes vtkPolyData points with one vertex cell each.
//   image:  a uniform grid piece (a sparse-grid brick set, a dense field), vtkImageData.
//   mesh:   cells of one VTK cell type over points (vtkUnstructuredGrid); "position" as above.
// Every other field of `point_fields` becomes point data, every `cell_fields` one cell data,
// `count` tuples of `components` values each, interleaved per point (x0 y0 z0 x1 ...).
struct VisualBlock {
  enum class Kind { points, image, mesh };
  std::string channel;  // the name Catalyst scripts see ("particles")
  Kind kind = Kind::points;
  std::size_t points = 0;  // points on this rank
  std::vector<HostField> point_fields;

  // image: this rank's extent (first and last point index per axis, inclusive) within the
  // global grid's whole extent; origin and spacing are the global grid's.
  std::array<int, 6> extent{}, whole_extent{};
  std::array<double, 3> origin{}, spacing{1, 1, 1};

  // mesh: `cells` cells of `cell_type` (VTK's numbering: 5 triangle, 10 tetrahedron, ...) with
  // `points_per_cell` point indices each in `connectivity`.
  std::size_t cells = 0;
  int cell_type = 5;
  int points_per_cell = 3;
  const std::int64_t* connectivity = nullptr;
  std::vector<HostField> cell_fields;
};

}  // namespace apron::io
