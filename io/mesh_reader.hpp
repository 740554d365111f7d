// Triangle-mesh readers: OBJ, PLY (ascii, binary little and big endian) and OFF. Polygons are
// fan-triangulated; zero-area triangles are skipped and counted, or kept and counted (cloth must
// not change topology). Point-cloud readers: vertex-only PLY (ascii, binary) and XYZ/CSV text.
// Malformed input is a MeshReadError naming the file, the line (text) or byte offset (binary),
// and the reason.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace apron::io {

class MeshReadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TriangleMesh {
  std::vector<std::array<double, 3>> vertices;
  std::vector<std::array<std::uint32_t, 3>> triangles;
  std::size_t polygons = 0;            // faces as given in the file
  std::size_t degenerate_skipped = 0;  // zero-area triangles left out
  std::size_t degenerate_kept = 0;     // zero-area triangles kept (MeshReadOptions)
};

struct MeshReadOptions {
  // Keep zero-area triangles (a repeated corner, collinear corners) in `triangles`, counted in
  // degenerate_kept, so that the triangles are exactly the file's faces (fan-triangulated). The
  // default skips them, counted in degenerate_skipped.
  bool keep_degenerate = false;
};

// Chooses the format by extension (.obj, .ply, .off; case-insensitive).
TriangleMesh read_mesh(const std::filesystem::path& file, const MeshReadOptions& options = {});
TriangleMesh read_obj(const std::filesystem::path& file, const MeshReadOptions& options = {});
TriangleMesh read_ply(const std::filesystem::path& file, const MeshReadOptions& options = {});
TriangleMesh read_off(const std::filesystem::path& file, const MeshReadOptions& options = {});

// Points with optional normals. Coordinates are finite and within float32 range (the device
// works in float32); normals, when given, are finite.
struct PointCloud {
  std::vector<std::array<double, 3>> points;
  std::vector<std::array<double, 3>> normals;  // empty, or one per point
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
