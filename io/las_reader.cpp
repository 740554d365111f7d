#include "io/las_reader.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "io/point_cloud_reader.hpp"

namespace apron::io {
namespace {

namespace fs = std::filesystem;

// The smallest point record of each point data format (LAS 1.4 R15, table 7 ff.); a record may
// be longer (extra bytes), never shorter. X, Y, Z are the first 12 bytes of every format.
constexpr std::uint16_t kMinRecord[11] = {20, 28, 26, 34, 57, 63, 30, 36, 38, 59, 67};
constexpr std::size_t kHeader12 = 227, kHeader13 = 235, kHeader14 = 375;
// Byte offsets of the public header's fields.
constexpr std::size_t kVersionAt = 24, kHeaderSizeAt = 94, kPointOffsetAt = 96, kFormatAt = 104,
                      kRecordLengthAt = 105, kLegacyCountAt = 107, kScaleAt = 131, kOffsetAt = 155,
                      kBoundsAt = 179, kCount14At = 247, kVlrCountAt = 100, kMinVlrBytes = 54;

[[noreturn]] void fail(const fs::path& file, std::uint64_t offset, const std::string& reason) {
  throw MeshReadError(file.string() + ": byte offset " + std::to_string(offset) + ": " + reason);
}

// Little-endian fields, whatever the machine's order.
std::uint64_t unsigned_le(const unsigned char* b, int bytes) {
  std::uint64_t v = 0;
  for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | b[k];
  return v;
}
std::int32_t int32_le(const unsigned char* b) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(unsigned_le(b, 4)));
}
double double_le(const unsigned char* b) {
  const std::uint64_t bits = unsigned_le(b, 8);
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

std::string version_text(int major, int minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

std::size_t min_header_size(int minor) {
  return minor >= 4 ? kHeader14 : (minor == 3 ? kHeader13 : kHeader12);
}

// The first bytes of the file, up to the 1.4 header's size.
std::vector<unsigned char> header_bytes(const fs::path& file, std::uintmax_t file_bytes) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw MeshReadError(file.string() + ": cannot open the LAS file (does it exist?)");
  std::vector<unsigned char> b(
      static_cast<std::size_t>(std::min<std::uintmax_t>(file_bytes, kHeader14)));
  in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (static_cast<std::size_t>(in.gcount()) != b.size())
    fail(file, static_cast<std::uint64_t>(in.gcount()), "cannot read the LAS header");
  return b;
}

void check_version_and_sizes(const fs::path& file, std::uintmax_t file_bytes,
                             const std::vector<unsigned char>& b, LasHeader& h) {
  h.version_major = b[kVersionAt];
  h.version_minor = b[kVersionAt + 1];
  if (h.version_major != 1 || h.version_minor > 4)
    fail(file, kVersionAt,
         "LAS version " + version_text(h.version_major, h.version_minor) +
             " is not supported (1.0 to 1.4); convert it with laspy or LAStools' las2las");
  h.header_size = static_cast<std::uint16_t>(unsigned_le(&b[kHeaderSizeAt], 2));
  const std::size_t least = min_header_size(h.version_minor);
  if (h.header_size < least)
    fail(file, kHeaderSizeAt,
         "the header size " + std::to_string(h.header_size) + " is below the " +
             std::to_string(least) + " bytes of a LAS " +
             version_text(h.version_major, h.version_minor) + " header");
  if (b.size() < least || h.header_size > file_bytes)
    fail(file, file_bytes,
         "the file ends inside the LAS header (" + std::to_string(h.header_size) + " bytes)");
  h.point_offset = static_cast<std::uint32_t>(unsigned_le(&b[kPointOffsetAt], 4));
  if (h.point_offset < h.header_size || h.point_offset > file_bytes)
    fail(file, kPointOffsetAt,
         "the offset to the point data, " + std::to_string(h.point_offset) +
             ", lies outside the file's points area (from the header's end, " +
             std::to_string(h.header_size) + ", to the file's size, " + std::to_string(file_bytes) +
             ")");
}

void check_format(const fs::path& file, const std::vector<unsigned char>& b, LasData data,
                  LasHeader& h) {
  int format = b[kFormatAt];
  h.compressed = (format & 0xC0) != 0;  // LASzip marks compressed point data by bit 7 (or 6)
  if (h.compressed && data == LasData::raw)
    fail(file, kFormatAt,
         "the point data are compressed (LAZ, format byte " + std::to_string(format) +
             "); name the file .laz, or decompress it: laszip -i in.laz -o out.las");
  if (!h.compressed && data == LasData::compressed)
    fail(file, kFormatAt,
         "the point data are not compressed (format byte " + std::to_string(format) +
             ", LASzip's bit 7 unset): this is a LAS file; name it .las");
  format &= 0x3F;
  if (format > 10)
    fail(file, kFormatAt,
         "point data format " + std::to_string(format) + " is not defined (0 to 10)");
  if (format >= 6 && h.version_minor < 4)
    fail(file, kFormatAt,
         "point data format " + std::to_string(format) + " needs LAS 1.4, the header says " +
             version_text(h.version_major, h.version_minor));
  h.point_format = format;
  h.record_length = static_cast<std::uint16_t>(unsigned_le(&b[kRecordLengthAt], 2));
  if (h.record_length < kMinRecord[format])
    fail(file, kRecordLengthAt,
         "point records of " + std::to_string(h.record_length) + " bytes are shorter than the " +
             std::to_string(kMinRecord[format]) + " of point data format " +
             std::to_string(format));
}

void read_count(const fs::path& file, const std::vector<unsigned char>& b, LasHeader& h) {
  const std::uint64_t legacy = unsigned_le(&b[kLegacyCountAt], 4);
  h.points = legacy;
  if (h.version_minor < 4) return;
  const std::uint64_t count = unsigned_le(&b[kCount14At], 8);
  if (legacy != 0 && count != 0 && legacy != count)
    fail(file, kLegacyCountAt,
         "the legacy point count " + std::to_string(legacy) + " disagrees with the LAS 1.4 count " +
             std::to_string(count) + " at byte " + std::to_string(kCount14At));
  h.points = count != 0 ? count : legacy;
}

void read_frame(const fs::path& file, const std::vector<unsigned char>& b, LasHeader& h) {
  static const char* axis = "XYZ";
  for (int d = 0; d < 3; ++d) {
    h.scale[d] = double_le(&b[kScaleAt + 8 * d]);
    h.offset[d] = double_le(&b[kOffsetAt + 8 * d]);
    // Bounds are stored max X, min X, max Y, min Y, max Z, min Z.
    h.max[d] = double_le(&b[kBoundsAt + 16 * d]);
    h.min[d] = double_le(&b[kBoundsAt + 16 * d + 8]);
    if (!std::isfinite(h.scale[d]) || h.scale[d] == 0)
      fail(file, kScaleAt + 8 * d,
           std::string("the ") + axis[d] + " scale factor is zero or not a finite number");
    if (!std::isfinite(h.offset[d]))
      fail(file, kOffsetAt + 8 * d,
           std::string("the ") + axis[d] + " offset is not a finite number");
    if (!std::isfinite(h.min[d]) || !std::isfinite(h.max[d]) ||
        (h.points > 0 && h.min[d] > h.max[d]))
      fail(file, kBoundsAt + 16 * d,
           std::string("the header's ") + axis[d] +
               " bounds are not finite or inverted (max below min); rewrite the header");
  }
}

// The variable-length records (54 bytes each at least) must fit between the header and the
// points: a reader allocates them by this count.
void read_vlr_count(const fs::path& file, const std::vector<unsigned char>& b, LasHeader& h) {
  h.vlr_count = static_cast<std::uint32_t>(unsigned_le(&b[kVlrCountAt], 4));
  const std::uint64_t room = h.point_offset - h.header_size;
  if (std::uint64_t{h.vlr_count} * kMinVlrBytes > room)
    fail(file, kVlrCountAt,
         std::to_string(h.vlr_count) +
             " variable-length records (54 bytes each at least) do "
             "not fit in the " +
             std::to_string(room) + " bytes between the header and the points");
}

// The announced points must lie within the file.
void check_points_fit(const fs::path& file, std::uintmax_t file_bytes, const LasHeader& h) {
  if (h.compressed) return;  // their size is known only once decompressed
  const std::uintmax_t room = file_bytes - h.point_offset;
  const std::uintmax_t whole = room / h.record_length;
  if (h.points > whole)
    fail(file, file_bytes,
         "the file ends early: the header announces " + std::to_string(h.points) + " points of " +
             std::to_string(h.record_length) + " bytes from byte " +
             std::to_string(h.point_offset) + ", the file holds " + std::to_string(whole));
}

// Points reach the device as float32 (relative to the cloud's centre): beyond its range, refuse.
void check_float_range(const fs::path& file, std::uint64_t at, std::uint64_t i, const double p[3]) {
  for (int d = 0; d < 3; ++d)
    if (!std::isfinite(p[d]) || std::fabs(p[d]) > std::numeric_limits<float>::max())
      fail(file, at,
           "point " + std::to_string(i) +
               " has a coordinate beyond the float32 range (scale or offset); rescale the cloud");
}

// A point outside the header's bounds by more than a scale step (writers round the bounds or
// take them before quantising) means a header that does not describe its points.
bool within_bounds(const double p[3], const LasHeader& h, int d) {
  const double slack =
      std::fabs(h.scale[d]) + 1e-12 * std::max(std::fabs(h.min[d]), std::fabs(h.max[d]));
  return p[d] >= h.min[d] - slack && p[d] <= h.max[d] + slack;
}

void check_bounds(const fs::path& file, std::uint64_t at, std::uint64_t i, const double p[3],
                  const LasHeader& h) {
  for (int d = 0; d < 3; ++d) {
    if (within_bounds(p, h, d)) continue;
    char text[768];
    std::snprintf(text, sizeof text,
                  "point %llu at (%.17g, %.17g, %.17g) lies outside the header's bounds "
                  "(%.17g, %.17g, %.17g) - (%.17g, %.17g, %.17g); the header does not describe "
                  "the points: rewrite it (laspy: las.update_header(); LAStools: lasinfo -repair)",
                  static_cast<unsigned long long>(i), p[0], p[1], p[2], h.min[0], h.min[1],
                  h.min[2], h.max[0], h.max[1], h.max[2]);
    fail(file, at, text);
  }
}

}  // namespace

bool las_point_ok(const double p[3], const LasHeader& h) {
  for (int d = 0; d < 3; ++d)
    if (!(std::fabs(p[d]) <= std::numeric_limits<float>::max() && within_bounds(p, h, d)))
      return false;
  return true;
}

void check_las_point(const fs::path& file, std::uint64_t at, std::uint64_t i, const double p[3],
                     const LasHeader& h) {
  check_float_range(file, at, i, p);
  check_bounds(file, at, i, p, h);
}

LasHeader read_las_header(const fs::path& file, std::uintmax_t file_bytes, LasData data) {
  const std::vector<unsigned char> b = header_bytes(file, file_bytes);
  if (b.size() < 4 || std::memcmp(b.data(), "LASF", 4) != 0)
    fail(file, 0, "not a LAS file: it does not start with 'LASF'");
  if (b.size() < kHeader12)
    fail(file, file_bytes, "the file ends inside the LAS header (227 bytes at least)");
  LasHeader h;
  check_version_and_sizes(file, file_bytes, b, h);
  check_format(file, b, data, h);
  read_vlr_count(file, b, h);
  read_count(file, b, h);
  read_frame(file, b, h);
  check_points_fit(file, file_bytes, h);
  return h;
}

// Records [first, first + count) of a block into points (in parallel); the first one that fails
// check_las_point is reported as a serial read would.
void decode_records(const fs::path& file, const LasHeader& h, const unsigned char* block,
                    std::size_t count, std::uint64_t first, std::uint64_t at,
                    std::array<double, 3>* points) {
  const auto n = static_cast<std::int64_t>(count);
  std::int64_t first_bad = n;
#pragma omp parallel for schedule(static) reduction(min : first_bad)
  for (std::int64_t k = 0; k < n; ++k) {
    const unsigned char* r = block + static_cast<std::size_t>(k) * h.record_length;
    double p[3];
    for (int d = 0; d < 3; ++d) p[d] = int32_le(r + 4 * d) * h.scale[d] + h.offset[d];
    points[k] = {p[0], p[1], p[2]};
    if (!las_point_ok(p, h)) first_bad = std::min(first_bad, k);
  }
  if (first_bad < n) {
    const auto k = static_cast<std::uint64_t>(first_bad);
    check_las_point(file, at + k * h.record_length, first + k, points[k].data(), h);
  }
}

PointCloud read_las(const fs::path& file, std::size_t available_bytes) {
  const auto file_bytes = readable_file_bytes(file, "LAS");
  const LasHeader h = read_las_header(file, file_bytes);
  if (h.points == 0) throw MeshReadError(file.string() + ": the point cloud is empty (no points)");
  // The memory is the points' (checked before any allocation) plus the blocks in flight.
  const std::size_t block_bytes =
      std::min<std::size_t>(kRecordBlockBytes, h.points * h.record_length) + h.record_length;
  if (available_bytes == 0) available_bytes = available_memory_bytes();
  check_read_memory(file, kRecordBlocksInFlight * block_bytes, static_cast<double>(h.points),
                    available_bytes);
  PointCloud cloud;
  cloud.points.resize(static_cast<std::size_t>(h.points));
  read_record_blocks(
      file, "LAS", h.point_offset, h.points, h.record_length,
      [&](const unsigned char* records, std::size_t n, std::uint64_t first, std::uint64_t at) {
        decode_records(file, h, records, n, first, at, cloud.points.data() + first);
      });
  return cloud;
}

}  // namespace apron::io
