// Point-cloud readers (issue 16): PLY (ascii, binary little and big endian; vertex x y z of any
// numeric type), XYZ / CSV / TXT text ("x y z" per line, optionally normals or a header line of
// names), PTS (a point count, then "x y z [intensity [r g b]]" per line) and PCD (ascii and
// binary; binary_compressed is refused by name). Malformed input is a MeshReadError naming the
// file, the line or byte offset, and the reason. Before anything is allocated, the file and the
// points it can hold are checked against the memory available: a file far larger than memory
// allows is an error, not an out-of-memory kill. LAS (and LAZ, E57 refused with the fix named):
// io/las_reader.hpp, chosen here by extension.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "io/mesh_reader.hpp"

namespace apron::io {

// Chooses the format by extension (.ply .xyz .csv .txt .pts .pcd .las, and .laz .e57 refused
// with the fix named; case-insensitive).
// available_bytes: the memory the read may use; 0: what the machine reports as available.
PointCloud read_point_file(const std::filesystem::path& file, std::size_t available_bytes = 0);

PointCloud read_pts(const std::filesystem::path& file);
PointCloud read_pcd(const std::filesystem::path& file);

// The size of `file` in bytes; throws MeshReadError naming it as a `kind` file ("LAS",
// "point-cloud") when it cannot be opened.
std::uintmax_t readable_file_bytes(const std::filesystem::path& file, const std::string& kind);

// The memory the operating system reports as available (MemAvailable), in bytes.
std::size_t available_memory_bytes();

// Throws MeshReadError when reading `file` (its bytes plus up to `points` points of 48 bytes, the
// points and normals in double) would not fit in `available_bytes`.
void check_read_memory(const std::filesystem::path& file, std::size_t file_bytes, double points,
                       std::size_t available_bytes);

}  // namespace apron::io
