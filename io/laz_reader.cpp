// LAZ through LASzip's C API (io/las_reader.hpp). The header is checked by the LAS reader's own
// code first, and the chunk table's size against the points: LASzip allocates the tables its
// header and chunk table announce, so a forged count must be refused before it reads them.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/las_reader.hpp"
#include "io/point_cloud_reader.hpp"

#ifdef APRON_HAVE_LASZIP
#include <laszip_api.h>

#include <algorithm>
#include <memory>
#include <vector>
#endif

namespace apron::io {
namespace {

namespace fs = std::filesystem;

[[maybe_unused]] [[noreturn]] void fail(const fs::path& file, std::uint64_t offset,
                                        const std::string& reason) {
  throw MeshReadError(file.string() + ": byte offset " + std::to_string(offset) + ": " + reason);
}

#ifdef APRON_HAVE_LASZIP

// LASzip frees nothing while a reader is open (laszip_clean refuses): close it first, also when
// opening failed half-way (closing a reader never opened is a harmless error).
struct LaszipDeleter {
  void operator()(void* p) const {
    laszip_close_reader(p);
    laszip_destroy(p);
  }
};

std::uint64_t read_le(std::ifstream& in, std::uint64_t at, int bytes) {
  unsigned char b[8] = {};
  in.clear();
  in.seekg(static_cast<std::streamoff>(at));
  in.read(reinterpret_cast<char*>(b), bytes);
  if (in.gcount() != bytes) return ~std::uint64_t{0};
  std::uint64_t v = 0;
  for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | b[k];
  return v;
}

// LASzip reads the chunk table (its offset is the first 8 bytes of the point data, or the file's
// last 8 when a streaming writer left -1 there) and allocates one entry per chunk it announces.
// Every chunk holds a point at least; a table announcing more chunks than points is forged. A
// table LASzip cannot find or read is its business: it then reads the chunks in sequence.
void check_chunk_table(const fs::path& file, std::ifstream& in, std::uintmax_t file_bytes,
                       const LasHeader& h) {
  std::uint64_t table = read_le(in, h.point_offset, 8);
  if (table == ~std::uint64_t{0} && file_bytes >= 8) table = read_le(in, file_bytes - 8, 8);
  if (table < std::uint64_t{h.point_offset} + 8 || table + 8 > file_bytes) return;
  const std::uint64_t chunks = read_le(in, table + 4, 4);
  if (chunks != ~std::uint64_t{0} && chunks > std::max<std::uint64_t>(h.points, 1))
    fail(file, table + 4,
         "the LAZ chunk table announces " + std::to_string(chunks) + " chunks for " +
             std::to_string(h.points) + " points (every chunk holds one at least)");
}

std::string laszip_error(void* laszip) {
  char* text = nullptr;
  laszip_get_error(laszip, &text);
  return text && *text ? std::string(text) : std::string("LASzip reports an error");
}

// Where LASzip had read to when it failed: the byte offset of the fault, near enough (at most
// the file's size: LASzip may have sought past a truncated end).
std::uint64_t position(std::ifstream& in, std::uintmax_t file_bytes) {
  in.clear();
  const auto at = in.tellg();
  return at < 0 ? 0 : std::min<std::uint64_t>(static_cast<std::uint64_t>(at), file_bytes);
}

#endif

}  // namespace

#ifdef APRON_HAVE_LASZIP

bool laz_supported() {
  return true;
}

PointCloud read_laz(const fs::path& file, std::size_t available_bytes) {
  const auto file_bytes = readable_file_bytes(file, "LAZ");
  const LasHeader h = read_las_header(file, file_bytes, LasData::compressed);
  if (h.points == 0) throw MeshReadError(file.string() + ": the point cloud is empty (no points)");
  // Before LASzip allocates anything: the points (and LASzip's chunk table, at most 16 bytes a
  // point, within the 48 bytes a point the check counts) must fit.
  if (available_bytes == 0) available_bytes = available_memory_bytes();
  check_read_memory(file, std::size_t{1} << 20, static_cast<double>(h.points), available_bytes);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw MeshReadError(file.string() + ": cannot open the LAZ file (does it exist?)");
  check_chunk_table(file, in, file_bytes, h);
  in.clear();
  in.seekg(0);

  void* raw = nullptr;
  if (laszip_create(&raw) != 0 || raw == nullptr)
    throw MeshReadError(file.string() + ": LASzip could not start (laszip_create failed)");
  const std::unique_ptr<void, LaszipDeleter> laszip(raw);
  laszip_BOOL compressed = 0;
  if (laszip_open_reader_stream(raw, in, &compressed) != 0)
    fail(file, position(in, file_bytes), "LASzip cannot read the file: " + laszip_error(raw));
  laszip_header* header = nullptr;
  if (laszip_get_header_pointer(raw, &header) != 0 || header == nullptr)
    fail(file, position(in, file_bytes), "LASzip cannot read the header: " + laszip_error(raw));
  const std::uint64_t count = header->extended_number_of_point_records != 0
                                  ? header->extended_number_of_point_records
                                  : header->number_of_point_records;
  if (count != h.points)
    fail(file, 107,
         "LASzip counts " + std::to_string(count) + " points where the header announces " +
             std::to_string(h.points));
  laszip_point* point = nullptr;
  if (laszip_get_point_pointer(raw, &point) != 0 || point == nullptr)
    fail(file, position(in, file_bytes), "LASzip cannot read the file: " + laszip_error(raw));

  PointCloud cloud;
  cloud.points.reserve(static_cast<std::size_t>(h.points));
  for (std::uint64_t i = 0; i < h.points; ++i) {
    if (laszip_read_point(raw) != 0) {
      const std::uint64_t at = position(in, file_bytes);
      fail(file, at,
           "point " + std::to_string(i) + " cannot be decompressed: " + laszip_error(raw) +
               (at == file_bytes ? " (the file ends early: truncated?)" : ""));
    }
    const laszip_I32 xyz[3] = {point->X, point->Y, point->Z};
    double p[3];
    for (int d = 0; d < 3; ++d) p[d] = xyz[d] * h.scale[d] + h.offset[d];
    if (!las_point_ok(p, h)) check_las_point(file, position(in, file_bytes), i, p, h);
    cloud.points.push_back({p[0], p[1], p[2]});
  }
  return cloud;
}

#else

bool laz_supported() {
  return false;
}

PointCloud read_laz(const fs::path& file, std::size_t) {
  throw MeshReadError(file.string() +
                      ": LAZ (compressed LAS) needs LASzip, which this build does not link "
                      "(configured with APRON_LASZIP=OFF, or its source was not found: "
                      "cmake/Lidar.cmake); rebuild with it, or decompress the file (laszip -i " +
                      file.filename().string() +
                      " -o points.las, or in Python: laspy.read(...).write('points.las') with "
                      "lazrs installed) and give the .las file");
}

#endif

}  // namespace apron::io
