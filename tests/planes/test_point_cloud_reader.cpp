// Point-cloud readers (issue 16): every format's good input, and every error with its place.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "io/las_reader.hpp"
#include "io/point_cloud_reader.hpp"

namespace apron::io {
namespace {

namespace fs = std::filesystem;

// The read fails with a message matching `pattern` (which names the file and the place).
void expect_refused(const fs::path& file, const std::string& pattern, std::size_t memory = 0) {
  try {
    read_point_file(file, memory);
    ADD_FAILURE() << file << ": no error, expected " << pattern;
  } catch (const MeshReadError& e) {
    EXPECT_TRUE(std::regex_search(e.what(), std::regex(pattern))) << e.what();
    EXPECT_NE(std::string(e.what()).find(file.filename().string()), std::string::npos) << e.what();
  }
}

class PointCloudReader : public ::testing::Test {
 protected:
  // One directory per test: ctest runs the discovered tests in parallel, and a shared directory
  // would be removed by one test's TearDown while another still writes into it.
  fs::path dir_ =
      fs::temp_directory_path() / (std::string("apron_test_point_cloud_reader_") +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  void expect_error(const fs::path& file, const std::string& pattern, std::size_t memory = 0) {
    expect_refused(file, pattern, memory);
  }
};

template <class T>
std::string bytes_of(std::initializer_list<T> values, bool big_endian) {
  std::string out;
  for (T v : values) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof v);
    if (big_endian) std::reverse(b, b + sizeof b);
    out.append(b, sizeof b);
  }
  return out;
}

std::string ply_header(const char* format, const char* type, int n) {
  return std::string("ply\nformat ") + format + " 1.0\nelement vertex " + std::to_string(n) +
         "\nproperty " + type + " x\nproperty " + type + " y\nproperty " + type +
         " z\nproperty uchar red\nend_header\n";
}

TEST_F(PointCloudReader, PlyAsciiAndBinaryBothEndiansFloatAndDouble) {
  const auto a =
      read_point_file(write("a.ply", ply_header("ascii", "float", 2) + "1 2 3 7\n4 5 6 8\n"));
  ASSERT_EQ(a.points.size(), 2u);
  EXPECT_EQ(a.points[1][2], 6);
  for (bool big : {false, true}) {
    const char* format = big ? "binary_big_endian" : "binary_little_endian";
    std::string f = ply_header(format, "float", 2);
    for (float v : {1.f, 2.f, 3.f}) f += bytes_of<float>({v}, big);
    f += '\x07';
    for (float v : {4.f, 5.f, 6.f}) f += bytes_of<float>({v}, big);
    f += '\x08';
    const auto pf = read_point_file(write(std::string("f") + format + ".ply", f));
    EXPECT_EQ(pf.points[1][1], 5) << format;
    std::string d =
        ply_header(format, "double", 1) + bytes_of<double>({-1.5, 2.25, 1e10}, big) + '\x01';
    const auto pd = read_point_file(write(std::string("d") + format + ".ply", d));
    EXPECT_EQ(pd.points[0][2], 1e10) << format;
  }
}

TEST_F(PointCloudReader, TextFormats) {
  EXPECT_EQ(read_point_file(write("a.xyz", "0 0 0\n1 2 3\n")).points.size(), 2u);
  EXPECT_EQ(read_point_file(write("a.csv", "x,y,z\n1,2,3\n")).points[0][1], 2);
  EXPECT_EQ(read_point_file(write("a.txt", "1 2 3\n")).points.size(), 1u);
  const auto pts = read_point_file(write("a.pts", "2\n1 2 3 50 1 2 3\n4 5 6 60 4 5 6\n"));
  ASSERT_EQ(pts.points.size(), 2u);
  EXPECT_EQ(pts.points[1][0], 4);
}

std::string pcd_header(const char* data, int n) {
  return "# .PCD v0.7 - Point Cloud Data\nVERSION 0.7\nFIELDS x y z rgb\nSIZE 4 4 8 4\n"
         "TYPE F F F U\nCOUNT 1 1 1 1\nWIDTH " +
         std::to_string(n) +
         "\nHEIGHT 1\n"
         "VIEWPOINT 0 0 0 1 0 0 0\nPOINTS " +
         std::to_string(n) + "\nDATA " + data + "\n";
}

TEST_F(PointCloudReader, PcdAsciiAndBinarySkipInvalidPoints) {
  const auto a =
      read_point_file(write("a.pcd", pcd_header("ascii", 3) + "1 2 3 0\nnan nan nan 0\n4 5 6 9\n"));
  ASSERT_EQ(a.points.size(), 2u);  // the NaN point of an organised cloud is skipped
  EXPECT_EQ(a.points[1][2], 6);
  std::string b = pcd_header("binary", 2);
  b += bytes_of<float>({1.f, 2.f}, false) + bytes_of<double>({3.0}, false) +
       bytes_of<std::uint32_t>({0}, false);
  b += bytes_of<float>({4.f, 5.f}, false) + bytes_of<double>({6.0}, false) +
       bytes_of<std::uint32_t>({0}, false);
  const auto pb = read_point_file(write("b.pcd", b));
  ASSERT_EQ(pb.points.size(), 2u);
  EXPECT_EQ(pb.points[1][2], 6);
}

TEST_F(PointCloudReader, EveryErrorNamesFileAndPlace) {
  expect_error(write("e1.ply",
                     "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\n"
                     "property float y\nproperty float z\nend_header\n1 2 3\n4 x 6\n"),
               ":9: 'x' is not a valid number");
  expect_error(
      write("e2.ply", ply_header("binary_little_endian", "float", 2) + std::string(13, '\0')),
      "byte offset [0-9]+: the file ends early");
  expect_error(
      write("e3.ply",
            "ply\nformat ascii 1.0\nelement face 1\nproperty list uchar int v\nend_header\n0\n"),
      "declares no 'vertex' element");
  expect_error(write("e4.ply", "ply\nformat binary_middle_endian 1.0\nend_header\n"),
               ":2: unknown PLY format");
  expect_error(write("e5.xyz", "1 2 3\n4 5\n"), ":2: 2 values, but 3");
  expect_error(write("e6.xyz", "1 2 nan\n"), ":1: point 0 has a coordinate that is not a finite");
  expect_error(write("e7.pts", "3\n1 2 3\n"), "declares 3 points but the file holds 1");
  expect_error(write("e8.pts", "1 2 3\n"), ":1: a PTS file starts with its point count");
  expect_error(write("e9.pcd", pcd_header("binary_compressed", 1)),
               ":11: PCD 'DATA binary_compressed' is not supported");
  expect_error(write("e10.pcd", pcd_header("binary", 2) + std::string(20, '\0')),
               "byte offset [0-9]+: the file ends early");
  expect_error(write("e11.pcd", pcd_header("binary", 1) + std::string(24, '\0')),
               "data follows the 1 points");
  expect_error(
      write("e12.pcd", "VERSION 0.7\nFIELDS x y\nSIZE 4 4\nTYPE F F\nPOINTS 1\nDATA ascii\n1 2\n"),
      "FIELDS lack x, y or z");
  expect_error(write("e13.pcd", pcd_header("ascii", 2) + "1 2 3 0\n"),
               "declares 2 points but the data holds 1");
  expect_error(write("e14.pcd", "VERSION 0.7\nCOLOUR x\n"), ":2: unknown PCD header line 'COLOUR'");
  expect_error(write("e15.dat", "1 2 3\n"), "unknown point-cloud format '.dat'");
  expect_error(write("e16.xyz", ""), "the point cloud is empty");
  expect_error(dir_ / "missing.ply", "cannot open the point-cloud file");
}

TEST_F(PointCloudReader, FileLargerThanMemoryIsRefusedBeforeReading) {
  const fs::path big =
      write("big.ply", ply_header("binary_little_endian", "float", 1) + std::string(13, '\0'));
  // 100 bytes of memory: the file (and the points it may hold) cannot fit.
  expect_error(big, "needs about .* GB of memory .* are available", 100);
  EXPECT_GT(available_memory_bytes(), 0u);
}

}  // namespace
}  // namespace apron::io

namespace apron::io {
namespace {

// A LAS 1.2 file of point format 0 (20-byte records: X, Y, Z as int32, the rest zero), scale
// 0.001, offset (100, 200, 300), the header's bounds those of the points.
std::string las_format0(const std::vector<std::array<std::int32_t, 3>>& xyz) {
  std::string h(227, '\0');
  auto put = [&](std::size_t at, const auto& v) { std::memcpy(&h[at], &v, sizeof v); };
  std::memcpy(&h[0], "LASF", 4);
  h[24] = 1, h[25] = 2;
  put(94, std::uint16_t{227});
  put(96, std::uint32_t{227});
  put(105, std::uint16_t{20});
  put(107, static_cast<std::uint32_t>(xyz.size()));
  put(111, static_cast<std::uint32_t>(xyz.size()));
  const double scale[3] = {0.001, 0.001, 0.001}, offset[3] = {100, 200, 300};
  put(131, scale);
  put(155, offset);
  double bounds[6] = {-1e300, 1e300, -1e300, 1e300, -1e300, 1e300};  // max x, min x, max y, ...
  for (const auto& p : xyz)
    for (int d = 0; d < 3; ++d) {
      bounds[2 * d] = std::max(bounds[2 * d], p[d] * scale[d] + offset[d]);
      bounds[2 * d + 1] = std::min(bounds[2 * d + 1], p[d] * scale[d] + offset[d]);
    }
  put(179, bounds);
  std::string records(20 * xyz.size(), '\0');
  for (std::size_t i = 0; i < xyz.size(); ++i) std::memcpy(&records[20 * i], xyz[i].data(), 12);
  return h + records;
}

// The LAS reader decodes 8 MiB blocks of records in parallel while it reads the next one: a file
// of three blocks (1,000,000 records) gives every point, in order, exactly as X * scale + offset;
// a point outside the header's bounds in the third block is reported with its byte offset and
// index, as a serial read would.
TEST_F(PointCloudReader, LasOfSeveralBlocksReadsEveryPointInOrder) {
  std::vector<std::array<std::int32_t, 3>> xyz(1000000);
  for (std::size_t i = 0; i < xyz.size(); ++i) {
    const auto k = static_cast<std::int32_t>(i);
    xyz[i] = {k % 1000, (k / 1000) % 1000, -(k % 777)};
  }
  const PointCloud cloud = read_point_file(write("blocks.las", las_format0(xyz)));
  ASSERT_EQ(cloud.points.size(), xyz.size());
  for (std::size_t i = 0; i < xyz.size(); ++i)
    ASSERT_TRUE(cloud.points[i][0] == xyz[i][0] * 0.001 + 100 &&
                cloud.points[i][1] == xyz[i][1] * 0.001 + 200 &&
                cloud.points[i][2] == xyz[i][2] * 0.001 + 300)
        << "point " << i;
  std::string bad = las_format0(xyz);
  const std::size_t outlier = 900001;  // in the third block
  const std::int32_t far = 2000000;
  std::memcpy(&bad[227 + 20 * outlier], &far, 4);
  expect_error(write("outlier.las", bad), "byte offset " + std::to_string(227 + 20 * outlier) +
                                              ": point " + std::to_string(outlier) +
                                              " at .* lies outside the header's bounds");
}

// Binary records reach their decoder block by block, in the file's order, with their first index
// and byte offset, also when there are many more blocks than reads in flight; a file that ends
// inside the last block names the offset where it ended.
TEST_F(PointCloudReader, RecordBlocksArriveInOrderWithTheirOffsets) {
  constexpr std::size_t kRecords = 10000, kBytes = 7, kHeader = 5;
  std::string file(kHeader, 'h');
  for (std::uint32_t i = 0; i < kRecords; ++i) {
    file += bytes_of<std::uint32_t>({i}, false);
    file += std::string(kBytes - 4, static_cast<char>(i % 251));
  }
  const fs::path whole = write("records.bin", file);
  std::uint64_t next = 0, blocks = 0;
  read_record_blocks(
      whole, "test", kHeader, kRecords, kBytes,
      [&](const unsigned char* records, std::size_t n, std::uint64_t first, std::uint64_t at) {
        ASSERT_EQ(first, next);
        ASSERT_EQ(at, kHeader + first * kBytes);
        ASSERT_LE(n, 1000 / kBytes);
        for (std::size_t k = 0; k < n; ++k) {
          std::uint32_t index;
          std::memcpy(&index, records + k * kBytes, 4);
          ASSERT_EQ(index, first + k);
          ASSERT_EQ(records[k * kBytes + 6], static_cast<unsigned char>((first + k) % 251));
        }
        next += n, ++blocks;
      },
      1000);
  EXPECT_EQ(next, kRecords);
  EXPECT_GT(blocks, static_cast<std::uint64_t>(4 * kRecordBlocksInFlight));
  file.resize(file.size() - 3);
  const fs::path cut = write("cut.bin", file);
  try {
    read_record_blocks(
        cut, "test", kHeader, kRecords, kBytes,
        [](const unsigned char*, std::size_t, std::uint64_t, std::uint64_t) {}, 1000);
    ADD_FAILURE() << "a file that ends early was read";
  } catch (const MeshReadError& e) {
    const std::string expected =
        "cut.bin: byte offset " + std::to_string(file.size()) + ": the file ends early";
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

// A binary PLY of several blocks: every point in order, and a point that is not finite in the
// third block reported with its byte offset and index.
TEST_F(PointCloudReader, BinaryPlyOfSeveralBlocksReadsEveryPointInOrder) {
  constexpr int kPoints = 2000000;  // 24 MB of three floats: three blocks
  std::string header = "ply\nformat binary_little_endian 1.0\nelement vertex " +
                       std::to_string(kPoints) +
                       "\nproperty float x\nproperty float y\nproperty float z\nend_header\n";
  std::string body(12 * static_cast<std::size_t>(kPoints), '\0');
  for (int i = 0; i < kPoints; ++i) {
    const float p[3] = {static_cast<float>(i % 1000), static_cast<float>(i / 1000),
                        -static_cast<float>(i % 777)};
    std::memcpy(&body[12 * static_cast<std::size_t>(i)], p, 12);
  }
  const PointCloud cloud = read_point_file(write("blocks.ply", header + body));
  ASSERT_EQ(cloud.points.size(), static_cast<std::size_t>(kPoints));
  for (int i = 0; i < kPoints; ++i) {
    const auto& p = cloud.points[static_cast<std::size_t>(i)];
    ASSERT_TRUE(p[0] == i % 1000 && p[1] == i / 1000 && p[2] == -(i % 777)) << "point " << i;
  }
  const std::size_t bad = 1500001;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&body[12 * bad + 4], &nan, 4);
  expect_error(write("nan.ply", header + body),
               "byte offset " + std::to_string(header.size() + 12 * bad) + ": point " +
                   std::to_string(bad) + " has a coordinate that is not a finite");
}

TEST_F(PointCloudReader, BinaryPlyFastPathChecksValues) {
  std::string f = ply_header("binary_little_endian", "float", 2);
  f += bytes_of<float>({1.f, 2.f, 3.f}, false) + '\x01';
  f += bytes_of<float>({4.f, std::numeric_limits<float>::infinity(), 6.f}, false) + '\x02';
  expect_error(write("inf.ply", f),
               "byte offset [0-9]+: point 1 has a coordinate that is not a finite");
  // Normals go through the general reader, which keeps them.
  std::string n =
      "ply\nformat binary_little_endian 1.0\nelement vertex 1\nproperty float x\n"
      "property float y\nproperty float z\nproperty float nx\nproperty float ny\n"
      "property float nz\nend_header\n" +
      bytes_of<float>({1.f, 2.f, 3.f, 0.f, 0.f, 1.f}, false);
  const auto c = read_point_file(write("normals.ply", n));
  ASSERT_EQ(c.normals.size(), 1u);
  EXPECT_EQ(c.normals[0][2], 1);
}

// ---- LAS: files written by laspy (write_las_files.py, run by ctest first) ----------------

// The folder of write_las_files.py's files (ctest's planes_las_read passes it; these tests are
// not discovered on their own).
fs::path las_dir() {
  const char* dir = std::getenv("APRON_LAS_DIR");
  return dir ? fs::path(dir) : fs::path();
}

// Every version and point format: the coordinates laspy reads back, to well within the scale
// (X * scale + offset in double, the same arithmetic).
TEST(LasFiles, EveryVersionAndPointFormatRoundTrips) {
  ASSERT_FALSE(las_dir().empty()) << "APRON_LAS_DIR is not set (run: ctest -R planes_las)";
  std::size_t files = 0;
  for (const auto& [minor, formats] : {std::pair{2, 4}, std::pair{3, 6}, std::pair{4, 11}})
    for (int k = 0; k < formats; ++k) {
      const std::string stem = "v1." + std::to_string(minor) + "_f" + std::to_string(k);
      SCOPED_TRACE(stem);
      const PointCloud cloud = read_point_file(las_dir() / (stem + ".las"));
      std::ifstream expected(las_dir() / (stem + ".xyz"));
      std::size_t i = 0, wrong = 0;
      double x, y, z;
      while (expected >> x >> y >> z) {
        ASSERT_LT(i, cloud.points.size());
        const auto& p = cloud.points[i++];
        wrong += std::fabs(p[0] - x) > 1e-9 || std::fabs(p[1] - y) > 1e-9 ||
                 std::fabs(p[2] - z) > 1e-9;  // the scale is 1e-3
      }
      EXPECT_EQ(i, 2000u);
      EXPECT_EQ(cloud.points.size(), i);
      EXPECT_EQ(wrong, 0u);
      ++files;
    }
  EXPECT_EQ(files, 4u + 6u + 11u);
}

TEST(LasFiles, MalformedFilesNameTheOffsetAndTheReason) {
  ASSERT_FALSE(las_dir().empty()) << "APRON_LAS_DIR is not set (run: ctest -R planes_las)";
  const std::pair<const char*, const char*> cases[] = {
      {"bad_truncated.las",
       "byte offset [0-9]+: the file ends early: the header announces 2000 "
       "points of 20 bytes from byte [0-9]+, the file holds 1998"},
      {"bad_header.las", "byte offset 100: the file ends inside the LAS header"},
      {"bad_magic.las", "byte offset 0: not a LAS file"},
      {"bad_version.las", "byte offset 24: LAS version 1.9 is not supported"},
      {"bad_format.las", "byte offset 104: point data format 11 is not defined"},
      {"bad_compressed.las", "byte offset 104: the point data are compressed \\(LAZ"},
      {"bad_record_length.las", "byte offset 105: point records of 12 bytes are shorter"},
      {"bad_point_offset.las", "byte offset 96: the offset to the point data"},
      {"bad_scale.las", "byte offset 139: the Y scale factor is zero"},
      {"bad_format_version.las", "byte offset 104: point data format 6 needs LAS 1.4"},
      {"bad_counts.las", "byte offset 107: the legacy point count 7 disagrees"},
      {"bad_bounds.las", "byte offset [0-9]+: point [0-9]+ at .* lies outside the header's bounds"},
  };
  for (const auto& [name, pattern] : cases) {
    try {
      read_point_file(las_dir() / name);
      ADD_FAILURE() << name << ": no error, expected " << pattern;
    } catch (const MeshReadError& e) {
      EXPECT_TRUE(std::regex_search(e.what(), std::regex(pattern))) << e.what();
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

// 100000 points need about 4.8 MB: refused within 2 MB before anything is allocated.
TEST(LasFiles, LargerThanMemoryRefusedBeforeAllocating) {
  ASSERT_FALSE(las_dir().empty()) << "APRON_LAS_DIR is not set (run: ctest -R planes_las)";
  try {
    read_point_file(las_dir() / "large.las", std::size_t{2} << 20);
    ADD_FAILURE() << "large.las read within 2 MB";
  } catch (const MeshReadError& e) {
    EXPECT_TRUE(std::regex_search(e.what(), std::regex("large.las: reading this file needs about")))
        << e.what();
  }
  EXPECT_EQ(read_point_file(las_dir() / "large.las").points.size(), 100000u);
}

// The points of `file` against `expected` (one "x y z" a line): the same count, and each within
// `tolerance`. Returns how many points differ.
std::size_t compare_points(const fs::path& file, const fs::path& expected, double tolerance,
                           std::size_t count) {
  const PointCloud cloud = read_point_file(file);
  std::ifstream in(expected);
  std::size_t i = 0, wrong = 0;
  double x, y, z;
  while (in >> x >> y >> z) {
    if (i >= cloud.points.size()) return count + 1;
    const auto& p = cloud.points[i++];
    wrong += std::fabs(p[0] - x) > tolerance || std::fabs(p[1] - y) > tolerance ||
             std::fabs(p[2] - z) > tolerance;
  }
  EXPECT_EQ(i, count) << expected;
  EXPECT_EQ(cloud.points.size(), i) << file;
  return wrong;
}

// ---- LAZ: the LAS files above compressed by laspy's LAZ backend (lazrs) ---------------------

// Every version and point format: the coordinates laspy reads back, to well within the scale
// of 1e-3 (the integers are lossless; the same X * scale + offset in double). Formats 4 and 5
// (LAS 1.3 wave packets) are the exception: lazrs compresses their wave packets as item version
// 2, which LASzip 3.5 does not read; refused with LASzip's reason and the byte offset.
TEST(LazFiles, EveryVersionAndPointFormatRoundTrips) {
  if (!laz_supported()) GTEST_SKIP() << "this build has no LASzip";
  ASSERT_FALSE(las_dir().empty()) << "APRON_LAS_DIR is not set (run: ctest -R planes_las)";
  std::size_t files = 0;
  for (const auto& [minor, formats] : {std::pair{2, 4}, std::pair{3, 6}, std::pair{4, 11}})
    for (int k = 0; k < formats; ++k) {
      const std::string stem = "v1." + std::to_string(minor) + "_f" + std::to_string(k);
      SCOPED_TRACE(stem);
      if (k == 4 || k == 5) {
        expect_refused(las_dir() / (stem + ".laz"),
                       "byte offset [0-9]+: LASzip cannot read the file: WAVEPACKET13 has version");
        continue;
      }
      EXPECT_EQ(
          compare_points(las_dir() / (stem + ".laz"), las_dir() / (stem + ".xyz"), 1e-9, 2000), 0u);
      ++files;
    }
  EXPECT_EQ(files, 4u + 4u + 9u);
}

TEST(LazFiles, MalformedFilesNameTheOffsetAndTheReason) {
  if (!laz_supported()) GTEST_SKIP() << "this build has no LASzip";
  ASSERT_FALSE(las_dir().empty()) << "APRON_LAS_DIR is not set (run: ctest -R planes_las)";
  const std::pair<const char*, const char*> cases[] = {
      {"bad_truncated.laz", "byte offset [0-9]+: point [0-9]+ cannot be decompressed"},
      {"bad_chunks.laz",
       "byte offset [0-9]+: the LAZ chunk table announces 4294967280 chunks for 2000 points"},
      {"bad_payload.laz",
       "byte offset [0-9]+: (point [0-9]+ (cannot be decompressed|at .* lies "
       "outside the header's bounds)|LASzip cannot read)"},
      {"bad_not_compressed.laz", "byte offset 104: the point data are not compressed"},
      // LASzip decodes past the last point without complaint: the bounds catch the nonsense
      {"bad_count.laz",
       "byte offset [0-9]+: point 2[0-9]{3} (cannot be decompressed|at .* lies "
       "outside the header's bounds)"},
  };
  for (const auto& [name, pattern] : cases) expect_refused(las_dir() / name, pattern);
}

TEST(LazFiles, LargerThanMemoryRefusedBeforeAllocating) {
  if (!laz_supported()) GTEST_SKIP() << "this build has no LASzip";
  ASSERT_FALSE(las_dir().empty()) << "APRON_LAS_DIR is not set (run: ctest -R planes_las)";
  expect_refused(las_dir() / "large.laz", "large.laz: reading this file needs about",
                 std::size_t{2} << 20);
  EXPECT_EQ(read_point_file(las_dir() / "large.laz").points.size(), 100000u);
}

// ---- E57: files written by pye57 (write_e57_files.py, run by ctest first) ------------------

fs::path e57_dir() {
  const char* dir = std::getenv("APRON_E57_DIR");
  return dir ? fs::path(dir) : fs::path();
}

// pye57 stores float32 coordinates: read back as the same doubles; the second scan of
// two_scans.e57 moved by its pose as pye57 moves it (to round-off: 1e-9 m on 10 m), the points
// marked invalid left out.
TEST(E57Files, ScansRoundTripInTheFilesFrame) {
  if (!e57_supported()) GTEST_SKIP() << "this build has no libE57Format";
  ASSERT_FALSE(e57_dir().empty()) << "APRON_E57_DIR is not set (run: ctest -R planes_e57)";
  EXPECT_EQ(compare_points(e57_dir() / "one_scan.e57", e57_dir() / "one_scan.xyz", 0, 3000), 0u);
  EXPECT_EQ(
      compare_points(e57_dir() / "two_scans.e57", e57_dir() / "two_scans.xyz", 1e-9, 1400 + 2500),
      0u);
}

TEST(E57Files, MalformedFilesNameThePlaceAndTheReason) {
  if (!e57_supported()) GTEST_SKIP() << "this build has no libE57Format";
  ASSERT_FALSE(e57_dir().empty()) << "APRON_E57_DIR is not set (run: ctest -R planes_e57)";
  const std::pair<const char*, const char*> cases[] = {
      {"bad_truncated.e57",
       "byte offset 16: the header gives the file's length as [0-9]+ bytes, the file has [0-9]+"},
      {"bad_header.e57", "byte offset 30: the file ends inside the 48-byte E57 header"},
      {"bad_magic.e57", "byte offset 0: not an E57 file"},
      {"bad_length.e57", "byte offset 16: the header gives the file's length"},
      {"bad_xml_offset.e57", "byte offset 24: the XML section .* lies outside the file"},
      {"bad_checksum.e57", "E57 element .*: .*checksum"},
  };
  for (const auto& [name, pattern] : cases) expect_refused(e57_dir() / name, pattern);
}

TEST(E57Files, LargerThanMemoryRefusedBeforeAllocating) {
  if (!e57_supported()) GTEST_SKIP() << "this build has no libE57Format";
  ASSERT_FALSE(e57_dir().empty()) << "APRON_E57_DIR is not set (run: ctest -R planes_e57)";
  expect_refused(e57_dir() / "large.e57", "large.e57: reading this file needs about",
                 std::size_t{4} << 20);
  EXPECT_EQ(read_point_file(e57_dir() / "large.e57").points.size(), 100000u);
}

// A build without a library refuses its format naming the fix; with it, a stub is malformed.
TEST_F(PointCloudReader, LazAndE57RefusedNamingTheFixOrThePlace) {
  if (!laz_supported())
    expect_error(write("scan.laz", "LASF"),
                 "scan.laz: LAZ \\(compressed LAS\\) needs LASzip.*laszip -i");
  else
    expect_error(write("scan.laz", "LASF"),
                 "scan.laz: byte offset 4: the file ends inside the LAS header");
  if (!e57_supported())
    expect_error(write("scan.E57", "ASTM-E57"), "scan.E57: E57 needs libE57Format.*pdal translate");
  else
    expect_error(write("scan.E57", "ASTM-E57"),
                 "scan.E57: byte offset 8: the file ends inside the 48-byte E57 header");
  expect_error(write("tiny.las", "LASF"),
               "tiny.las: byte offset 4: the file ends inside the LAS header");
}

}  // namespace
}  // namespace apron::io
