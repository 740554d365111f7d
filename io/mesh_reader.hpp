// Triangle-mesh readers: OBJ, PLY (ascii, binary little and big endian), OFF and STL (ascii and
// binary). Polygons are fan-triangulated; zero-area triangles are skipped and counted, or kept and
// counted (cloth must not change topology). STL stores each triangle's corners, not shared
// vertices: corners that coincide within a tolerance are welded into one vertex. Point-cloud
// readers: vertex-only PLY (ascii, binary) and XYZ/CSV text. Malformed input is a MeshReadError
// naming the file, the line (text) or byte offset (binary), and the reason.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/uninitialised_vector.hpp"

namespace apron::io {

class MeshReadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The triangles of one ascii STL solid ("solid name ... endsolid"): triangles[first, first +
// count). A binary STL is one solid, named by its header's text.
struct MeshSolid {
  std::string name;
  std::size_t first = 0;
  std::size_t count = 0;
};

struct TriangleMesh {
  std::vector<std::array<double, 3>> vertices;
  std::vector<std::array<std::uint32_t, 3>> triangles;
  std::size_t polygons = 0;            // faces as given in the file
  std::size_t degenerate_skipped = 0;  // zero-area triangles left out
  std::size_t degenerate_kept = 0;     // zero-area triangles kept (MeshReadOptions)
  // Vertices in the file (STL: 3 corners per facet) before welding, and how many of them were
  // welded into another: vertices.size() == vertices_read - welded_vertices. Other formats weld
  // nothing.
  std::size_t vertices_read = 0;
  std::size_t welded_vertices = 0;
  // STL: the solids, in file order, covering `triangles` (empty for other formats). Welding
  // spans solids: solids that touch share the vertices where they do.
  std::vector<MeshSolid> solids;
};

struct MeshReadOptions {
  // Keep zero-area triangles (a repeated corner, collinear corners) in `triangles`, counted in
  // degenerate_kept, so that the triangles are exactly the file's faces (fan-triangulated). The
  // default skips them, counted in degenerate_skipped.
  bool keep_degenerate = false;
  // STL: corners closer than the larger of weld_absolute (in the file's units) and weld_relative
  // times the diagonal of all corners' bounding box weld into one vertex (the first one read;
  // the nearest when several are in reach). Exact duplicates always weld; both 0 welds only them.
  double weld_relative = 1e-6;
  double weld_absolute = 0;
  // STL: the memory a read may use, in bytes (0: what the machine reports as available). A file
  // whose triangles would need more is refused before anything is allocated.
  std::size_t available_bytes = 0;
};

// Chooses the format by extension (.obj, .ply, .off, .stl; case-insensitive).
TriangleMesh read_mesh(const std::filesystem::path& file, const MeshReadOptions& options = {});
TriangleMesh read_obj(const std::filesystem::path& file, const MeshReadOptions& options = {});
TriangleMesh read_ply(const std::filesystem::path& file, const MeshReadOptions& options = {});
TriangleMesh read_off(const std::filesystem::path& file, const MeshReadOptions& options = {});
// Ascii or binary, told apart by content, not by the header's first word: a binary file is one
// of 84 + 50 x (its triangle count) bytes (many binary headers begin "solid" too).
TriangleMesh read_stl(const std::filesystem::path& file, const MeshReadOptions& options = {});

// Points with optional normals. Coordinates are finite and within float32 range (the device
// works in float32); normals, when given, are finite.
// A cloud's array is filled by its reader's threads (kernels/common/uninitialised_vector.hpp).
using Points = UninitialisedVector<std::array<double, 3>>;
struct PointCloud {
  Points points;
  Points normals;  // empty, or one per point
};

// Chooses the format by extension (.ply; .xyz, .csv, .txt; case-insensitive).
PointCloud read_point_cloud(const std::filesystem::path& file);
// The PLY 'vertex' element: properties x, y, z (any numeric type; float or double usually) and
// optionally nx, ny, nz (all three or none). Other elements (faces, ...) are ignored.
PointCloud read_ply_points(const std::filesystem::path& file);
// One point per line: 'x y z' or 'x y z nx ny nz', separated by white space or commas; '#'
// starts a comment. A first line of names (e.g. "x,y,z,nx,ny,nz") says which columns hold what.
PointCloud read_xyz(const std::filesystem::path& file);

}  // namespace apron::io
