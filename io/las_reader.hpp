// Lidar point clouds: ASPRS LAS 1.0-1.4 read directly (point data formats 0 to 10,
// coordinates as integers times the header's scale plus its offset); LAZ (LASzip-compressed LAS)
// and E57 (ASTM E2807) need libraries this build does not link, and are refused with the fix
// named. Malformed input is a MeshReadError naming the file, the byte offset and the reason; the
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
};

// The header of a LAS file of file_bytes bytes, checked (signature, version, sizes, point
// format, scale factors, bounds, and that the announced points lie within the file).
LasHeader read_las_header(const std::filesystem::path& file, std::uintmax_t file_bytes);

// The points of a LAS file; available_bytes: the memory the read may use (0: what the machine
// reports as available).
PointCloud read_las(const std::filesystem::path& file, std::size_t available_bytes = 0);

// LAZ and E57: a MeshReadError that names the library to install (this build reads neither).
PointCloud read_laz(const std::filesystem::path& file);
PointCloud read_e57(const std::filesystem::path& file);

}  // namespace apron::io
