// Triangle-mesh readers: OBJ, PLY (ascii, binary little and big endian) and OFF. Polygons are
// fan-triangulated; zero-area triangles are skipped and counted. Malformed input is a
// MeshReadError naming the file, the line (text) or byte offset (binary), and the reason.
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
};

// Chooses the format by extension (.obj, .ply, .off; case-insensitive).
TriangleMesh read_mesh(const std::filesystem::path& file);
TriangleMesh read_obj(const std::filesystem::path& file);
TriangleMesh read_ply(const std::filesystem::path& file);
TriangleMesh read_off(const std::filesystem::path& file);

}  // namespace apron::io
