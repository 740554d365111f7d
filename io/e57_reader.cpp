// E57 (ASTM E2807) through libE57Format's simple API (io/las_reader.hpp). The file header is
// checked here first (signature, lengths against the file), so the commonest faults name a byte
// offset; what libE57Format finds later (checksums, the XML, the binary sections) names the
// element being read and the library's reason. The points of every scan are counted from the
// XML before any buffer is allocated.
#include <cstdint>
#include <filesystem>
#include <string>

#include "io/las_reader.hpp"
#include "io/point_cloud_reader.hpp"

#ifdef APRON_HAVE_E57
#include <E57SimpleReader.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <vector>
#endif

namespace apron::io {
namespace {

namespace fs = std::filesystem;

#ifdef APRON_HAVE_E57

[[noreturn]] void fail(const fs::path& file, std::uint64_t offset, const std::string& reason) {
  throw MeshReadError(file.string() + ": byte offset " + std::to_string(offset) + ": " + reason);
}

std::uint64_t u64_le(const unsigned char* b) {
  std::uint64_t v = 0;
  for (int k = 7; k >= 0; --k) v = (v << 8) | b[k];
  return v;
}

// The 48-byte file header (E2807 section 9.2): "ASTM-E57", major and minor version (u32 each),
// the file's physical length, the XML section's physical offset and logical length, page size.
void check_file_header(const fs::path& file, std::uintmax_t file_bytes) {
  std::ifstream in(file, std::ios::binary);
  unsigned char b[48] = {};
  in.read(reinterpret_cast<char*>(b), sizeof b);
  if (in.gcount() < 8 || std::memcmp(b, "ASTM-E57", 8) != 0)
    fail(file, 0, "not an E57 file: it does not start with 'ASTM-E57'");
  if (in.gcount() != sizeof b)
    fail(file, file_bytes, "the file ends inside the 48-byte E57 header");
  const std::uint64_t length = u64_le(b + 16), xml_at = u64_le(b + 24), xml_bytes = u64_le(b + 32);
  if (length != file_bytes)
    fail(file, 16,
         "the header gives the file's length as " + std::to_string(length) +
             " bytes, the file has " + std::to_string(file_bytes) + " (truncated or appended to?)");
  if (xml_at < sizeof b || xml_at >= file_bytes || xml_bytes > file_bytes - xml_at)
    fail(file, 24,
         "the XML section (" + std::to_string(xml_bytes) + " bytes at byte " +
             std::to_string(xml_at) + ") lies outside the file's " + std::to_string(file_bytes) +
             " bytes");
}

[[noreturn]] void e57_fail(const fs::path& file, const std::string& element,
                           const std::string& reason) {
  throw MeshReadError(file.string() + ": E57 element " + element + ": " + reason);
}

// A scan's pose: a unit quaternion (w, x, y, z) and a translation, applied as R p + t.
struct Pose {
  double r[3][3];
  double t[3];
};

Pose pose_of(const e57::Data3D& scan) {
  const auto& q = scan.pose.rotation;
  const double n = std::sqrt(q.w * q.w + q.x * q.x + q.y * q.y + q.z * q.z);
  const double w = q.w / n, x = q.x / n, y = q.y / n, z = q.z / n;
  return {{{1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)},
           {2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)},
           {2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)}},
          {scan.pose.translation.x, scan.pose.translation.y, scan.pose.translation.z}};
}

bool identity(const e57::Data3D& scan) {
  const auto& q = scan.pose.rotation;
  const auto& t = scan.pose.translation;
  return q.w == 1 && q.x == 0 && q.y == 0 && q.z == 0 && t.x == 0 && t.y == 0 && t.z == 0;
}

// The points of one scan, appended to cloud, read a block at a time.
void read_scan(const fs::path& file, const e57::Reader& reader, std::int64_t index,
               std::int64_t points, PointCloud& cloud) {
  const std::string element = "/data3D/" + std::to_string(index);
  e57::Data3D scan;
  if (!reader.ReadData3D(index, scan)) e57_fail(file, element, "cannot read the scan's header");
  const auto& f = scan.pointFields;
  const bool cartesian = f.cartesianXField && f.cartesianYField && f.cartesianZField;
  const bool spherical =
      f.sphericalRangeField && f.sphericalAzimuthField && f.sphericalElevationField;
  if (!cartesian && !spherical)
    e57_fail(file, element + "/points",
             "the points have neither cartesianX/Y/Z nor sphericalRange/Azimuth/Elevation");
  const Pose pose = pose_of(scan);
  const bool moved = !identity(scan);
  if (moved && !std::isfinite(pose.r[0][0] + pose.r[1][1] + pose.r[2][2] + pose.t[0] + pose.t[1] +
                              pose.t[2]))
    e57_fail(file, element + "/pose", "the pose is not a finite rotation and translation");

  const std::size_t block = static_cast<std::size_t>(std::min<std::int64_t>(points, 1 << 16));
  std::vector<double> a(block), b(block), c(block);
  std::vector<std::int8_t> invalid(block, 0);
  e57::Data3DPointsDouble buffers;
  if (cartesian) {
    buffers.cartesianX = a.data(), buffers.cartesianY = b.data(), buffers.cartesianZ = c.data();
    if (f.cartesianInvalidStateField) buffers.cartesianInvalidState = invalid.data();
  } else {
    buffers.sphericalRange = a.data(), buffers.sphericalAzimuth = b.data();
    buffers.sphericalElevation = c.data();
    if (f.sphericalInvalidStateField) buffers.sphericalInvalidState = invalid.data();
  }
  e57::CompressedVectorReader data = reader.SetUpData3DPointsData(index, block, buffers);
  std::int64_t read = 0;
  for (unsigned n; (n = data.read()) > 0;) {
    if (read + n > points)
      e57_fail(file, element + "/points",
               "holds more points than its recordCount, " + std::to_string(points));
    for (unsigned k = 0; k < n; ++k) {
      if (invalid[k] != 0) continue;  // 1: a direction only, 2: no point
      double p[3];
      if (cartesian) {
        p[0] = a[k], p[1] = b[k], p[2] = c[k];
      } else {
        const double ce = std::cos(c[k]);
        p[0] = a[k] * ce * std::cos(b[k]), p[1] = a[k] * ce * std::sin(b[k]);
        p[2] = a[k] * std::sin(c[k]);
      }
      if (moved) {
        double q[3];
        for (int d = 0; d < 3; ++d)
          q[d] = pose.r[d][0] * p[0] + pose.r[d][1] * p[1] + pose.r[d][2] * p[2] + pose.t[d];
        std::copy(q, q + 3, p);
      }
      for (double v : p)
        if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max())
          e57_fail(
              file, element + "/points",
              "point " + std::to_string(read + k) + " is not finite or beyond the float32 range");
      cloud.points.push_back({p[0], p[1], p[2]});
    }
    read += n;
  }
  data.close();
}

#endif

}  // namespace

#ifdef APRON_HAVE_E57

bool e57_supported() {
  return true;
}

PointCloud read_e57(const fs::path& file, std::size_t available_bytes) {
  const auto file_bytes = readable_file_bytes(file, "E57");
  check_file_header(file, file_bytes);
  if (available_bytes == 0) available_bytes = available_memory_bytes();
  // The library holds the XML tree in memory as it opens the file: the file must fit first.
  check_read_memory(file, static_cast<std::size_t>(file_bytes), 0, available_bytes);
  std::string element = "the file header and XML section";
  try {
    const e57::Reader reader(file.string(), e57::ReaderOptions{});
    const std::int64_t scans = reader.GetData3DCount();
    std::vector<std::int64_t> sizes(static_cast<std::size_t>(scans), 0);
    double total = 0;
    for (std::int64_t i = 0; i < scans; ++i) {
      element = "/data3D/" + std::to_string(i) + "/points";
      std::int64_t rows = 0, columns = 0, groups = 0, group_points = 0;
      bool column_index = false;
      if (!reader.GetData3DSizes(i, rows, columns, sizes[i], groups, group_points, column_index) ||
          sizes[i] < 0)
        e57_fail(file, element, "cannot read the scan's point count");
      total += static_cast<double>(sizes[i]);
    }
    if (total == 0) throw MeshReadError(file.string() + ": the point cloud is empty (no points)");
    // Before any point is allocated: the points the XML announces must fit.
    check_read_memory(file, static_cast<std::size_t>(file_bytes), total, available_bytes);
    PointCloud cloud;
    cloud.points.reserve(static_cast<std::size_t>(total));
    for (std::int64_t i = 0; i < scans; ++i) {
      element = "/data3D/" + std::to_string(i) + "/points";
      if (sizes[i] > 0) read_scan(file, reader, i, sizes[i], cloud);
    }
    if (cloud.points.empty())
      throw MeshReadError(file.string() + ": every point of the E57 file is marked invalid");
    return cloud;
  } catch (const e57::E57Exception& e) {
    e57_fail(file, element, e.errorStr() + (e.context().empty() ? "" : " (" + e.context() + ")"));
  } catch (const MeshReadError&) {
    throw;
  } catch (const std::exception& e) {
    // What the library lets through from below (allocation, Xerces): still this file's fault.
    e57_fail(file, element, std::string("libE57Format: ") + e.what());
  }
}

#else

bool e57_supported() {
  return false;
}

PointCloud read_e57(const fs::path& file, std::size_t) {
  throw MeshReadError(file.string() +
                      ": E57 needs libE57Format (with Xerces-C), which this build does not link "
                      "(configured with APRON_E57=OFF, or Xerces-C or the source was not found: "
                      "install libxerces-c-dev, see cmake/Lidar.cmake); rebuild with it, or "
                      "convert the scan to LAS or PLY (CloudCompare, PDAL: pdal translate " +
                      file.filename().string() + " points.las) and give that file");
}

#endif

}  // namespace apron::io
