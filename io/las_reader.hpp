// Lidar point clouds: ASPRS LAS 1.0-1.4 read directly (point data formats 0 to 10,
// coordinates as integers times the header's scale plus its offset); LAZ (LASzip-compressed LAS)
// through LASzip and E57 (ASTM E2807) through libE57Format where the build links them
// (cmake/Lidar.cmake), refused with the fix named where it does not. Malformed input is a
// MeshReadError naming the file, the byte offset (an E57 file: the element) and the reason; the
// header's bounds are checked against the points; a file whose points cannot fit in memory is
// refused before anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "io/mesh_reader.hpp"

namespace apron::io {

// What the LAS public header says (the fields the reader uses).
struct LasHeader {
  int version_major = 0, version_minor = 0;
  std::uint16_t header_size = 0;
  std::uint32_t point_offset = 0;  // byte offset of the first point record
  int point_format = 0;            // 0 to 10
  std::uint16_t record_length = 0;
  std::uint64_t points = 0;
  double scale[3] = {1, 1, 1}, offset[3] = {0, 0, 0}, min[3] = {0, 0, 0}, max[3] = {0, 0, 0};
  bool compressed = false;      // LASzip's bit in the point format byte
  std::uint32_t vlr_count = 0;  // variable-length records between header and points
};

// What the point data of a file must be: stored as records (LAS), compressed (LAZ), or either.
enum class LasData { raw, compressed, any };

// The header of a LAS file of file_bytes bytes, checked (signature, version, sizes, point
// format, scale factors, bounds, the count of variable-length records, and that the announced
// points lie within the file when they are not compressed).
LasHeader read_las_header(const std::filesystem::path& file, std::uintmax_t file_bytes,
                          LasData data = LasData::raw);

// Throws a MeshReadError (file, byte offset `at`, point i) when point p lies beyond float32's
// range or outside the header's bounds by more than a scale step.
void check_las_point(const std::filesystem::path& file, std::uint64_t at, std::uint64_t i,
                     const double p[3], const LasHeader& h);
// The same test without the message: true when check_las_point would pass.
bool las_point_ok(const double p[3], const LasHeader& h);

// The points of a LAS file; available_bytes: the memory the read may use (0: what the machine
// reports as available).
PointCloud read_las(const std::filesystem::path& file, std::size_t available_bytes = 0);

// LAZ through LASzip: the same checks as a LAS file, plus the chunk table's size against the
// points before LASzip allocates it. Without LASzip in the build: a MeshReadError naming the fix.
PointCloud read_laz(const std::filesystem::path& file, std::size_t available_bytes = 0);
// E57 through libE57Format: every scan's points (Cartesian, or spherical converted), invalid
// points skipped, each scan moved by its pose into the file's frame. Without libE57Format in the
// build: a MeshReadError naming the fix.
PointCloud read_e57(const std::filesystem::path& file, std::size_t available_bytes = 0);

// Whether this build reads LAZ and E57.
bool laz_supported();
bool e57_supported();

}  // namespace apron::io
