// Mesh readers: every format reads the same mesh; malformed files fail with file, place, reason.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/mesh_reader.hpp"

namespace apron::io {
namespace {

namespace fs = std::filesystem;

class MeshReader : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() /
        ("apron_mesh_reader_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

  // The message names the file and the place, and gives the reason.
  void expect_error(const fs::path& file, const std::string& place, const std::string& reason) {
    try {
      read_mesh(file);
      ADD_FAILURE() << file << ": no error";
    } catch (const MeshReadError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(file.string() + place), std::string::npos) << msg;
      EXPECT_NE(msg.find(reason), std::string::npos) << msg;
    }
  }

  fs::path dir_;
};

// A unit square as one quad, plus a triangle: 3 triangles after fan triangulation.
void expect_square_and_triangle(const TriangleMesh& m) {
  ASSERT_EQ(m.vertices.size(), 5u);
  ASSERT_EQ(m.triangles.size(), 3u);
  EXPECT_EQ(m.polygons, 2u);
  EXPECT_EQ(m.degenerate_skipped, 0u);
  EXPECT_EQ(m.vertices[2][0], 1.0);
  EXPECT_EQ(m.vertices[4][2], 0.5);
  EXPECT_EQ(m.triangles[0], (std::array<std::uint32_t, 3>{0, 1, 2}));
  EXPECT_EQ(m.triangles[1], (std::array<std::uint32_t, 3>{0, 2, 3}));
  EXPECT_EQ(m.triangles[2], (std::array<std::uint32_t, 3>{1, 4, 2}));
}

const char* kObj =
    "# square and triangle\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nvt 0 0\nvn 0 0 1\n"
    "v 1.5 0.5 0.5\ng patch\nf 1/1/1 2//1 3 4\nf -4 -1 -3\n";

TEST_F(MeshReader, Obj) {
  expect_square_and_triangle(read_mesh(write("m.obj", kObj)));
}

TEST_F(MeshReader, Off) {
  expect_square_and_triangle(
      read_mesh(write("m.off",
                      "OFF\n# comment\n5 2 0\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n1.5 0.5 0.5\n4 0 1 2 3\n"
                      "3 1 4 2 255 0 0\n")));
}

TEST_F(MeshReader, PlyAscii) {
  expect_square_and_triangle(read_mesh(
      write("m.ply",
            "ply\nformat ascii 1.0\ncomment x\nelement vertex 5\nproperty float x\n"
            "property float y\nproperty float z\nproperty uchar red\nelement face 2\n"
            "property list uchar int vertex_indices\nend_header\n0 0 0 1\n1 0 0 2\n1 1 0 3\n"
            "0 1 0 4\n1.5 0.5 0.5 5\n4 0 1 2 3\n3 1 4 2\n")));
}

// Binary PLY of the same mesh, with double coordinates and uint indices, in either byte order.
std::string binary_ply(std::endian order) {
  std::string out = std::string("ply\nformat ") +
                    (order == std::endian::little ? "binary_little_endian" : "binary_big_endian") +
                    " 1.0\nelement vertex 5\nproperty double x\nproperty double y\n"
                    "property double z\nelement face 2\nproperty list uchar uint vertex_indices\n"
                    "end_header\n";
  auto put = [&](auto value) {
    char bytes[sizeof value];
    std::memcpy(bytes, &value, sizeof value);
    if (order != std::endian::native) std::reverse(bytes, bytes + sizeof value);
    out.append(bytes, sizeof value);
  };
  const double xyz[5][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0}, {1.5, 0.5, 0.5}};
  for (const auto& v : xyz)
    for (double c : v) put(c);
  put(std::uint8_t{4});
  for (std::uint32_t i : {0u, 1u, 2u, 3u}) put(i);
  put(std::uint8_t{3});
  for (std::uint32_t i : {1u, 4u, 2u}) put(i);
  return out;
}

TEST_F(MeshReader, PlyBinaryLittleEndian) {
  expect_square_and_triangle(read_mesh(write("le.ply", binary_ply(std::endian::little))));
}

TEST_F(MeshReader, PlyBinaryBigEndian) {
  expect_square_and_triangle(read_mesh(write("be.PLY", binary_ply(std::endian::big))));
}

TEST_F(MeshReader, DegenerateTrianglesAreSkippedAndCounted) {
  const TriangleMesh m =
      read_mesh(write("d.obj", "v 0 0 0\nv 1 0 0\nv 2 0 0\nv 0 1 0\nf 1 2 3\nf 1 1 4\nf 1 2 4\n"));
  EXPECT_EQ(m.triangles.size(), 1u);
  EXPECT_EQ(m.degenerate_skipped, 2u);  // collinear corners; a repeated corner
}

TEST_F(MeshReader, TruncatedBinaryPlyNamesTheByteOffset) {
  const std::string full = binary_ply(std::endian::little);
  expect_error(write("t.ply", full.substr(0, full.size() - 6)), ": byte offset",
               "the file ends early");
}

TEST_F(MeshReader, TruncatedOff) {
  expect_error(write("t.off", "OFF\n5 2 0\n0 0 0\n1 0 0\n"), ": the file ends before",
               "vertex 2 of 5");
}

TEST_F(MeshReader, BadCounts) {
  expect_error(write("c.off", "OFF\nfive 2 0\n"), ":2:", "expected the counts");
  expect_error(write("c.ply", "ply\nformat ascii 1.0\nelement vertex -3\nend_header\n"),
               ":3:", "count >= 0");
  expect_error(write("f.off", "OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n4 0 1 2\n"),
               ":6:", "declares 4 vertices but lists 3");
  // More vertices declared than the ascii body holds.
  expect_error(write("m.ply",
                     "ply\nformat ascii 1.0\nelement vertex 4\nproperty float x\n"
                     "property float y\nproperty float z\nend_header\n0 0 0\n1 0 0\n"),
               ":10", "the file ends early");
}

TEST_F(MeshReader, BadIndex) {
  expect_error(write("i.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\nf 1 2 9\n"),
               ":5:", "vertex index 8 is out of range");
  expect_error(write("i.off", "OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 3\n"), ":6:", "out of range");
  expect_error(write("z.obj", "v 0 0 0\nf 0 1 1\n"), ":2:", "is not a vertex index");
}

TEST_F(MeshReader, NanCoordinate) {
  expect_error(write("n.obj", "v 0 0 0\nv 1 nan 0\nv 0 1 0\nf 1 2 3\n"),
               ":2:", "not a finite number");
  expect_error(write("n.ply",
                     "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\n"
                     "property float y\nproperty float z\nend_header\n0 inf 0\n"),
               ":8:", "not a finite number");
}

TEST_F(MeshReader, EmptyMesh) {
  expect_error(write("e.obj", "# nothing\nv 0 0 0\n"), ": the mesh is empty", "no triangle");
  expect_error(write("e.off", "OFF\n0 0 0\n"), ": the mesh is empty", "no triangle");
}

TEST_F(MeshReader, NotANumberOrFormat) {
  expect_error(write("w.obj", "v 0 zero 0\n"), ":1:", "'zero' is not a number");
  expect_error(write("x.ply", "plx\n"), ":1:", "not a PLY file");
  expect_error(write("h.ply", "ply\nformat ascii 1.0\nelement vertex 1\n"), ": the PLY header",
               "no 'end_header'");
  expect_error(write("m.stl", "solid\n"), ": unknown mesh format", ".stl");
  expect_error(dir_ / "missing.obj", ": cannot open", "does it exist");
}

TEST_F(MeshReader, DegenerateTrianglesKeptOnRequest) {
  const fs::path file =
      write("k.obj", "v 0 0 0\nv 1 0 0\nv 2 0 0\nv 0 1 0\nf 1 2 3\nf 1 1 4\nf 1 2 4\n");
  const TriangleMesh m = read_mesh(file, MeshReadOptions{.keep_degenerate = true});
  ASSERT_EQ(m.triangles.size(), 3u);  // the file's topology, unchanged
  EXPECT_EQ(m.degenerate_kept, 2u);
  EXPECT_EQ(m.degenerate_skipped, 0u);
  EXPECT_EQ(m.triangles[1], (std::array<std::uint32_t, 3>{0, 0, 3}));
  // The default is unchanged: skip and count.
  EXPECT_EQ(read_mesh(file).degenerate_skipped, 2u);
  const TriangleMesh ply = read_mesh(
      write("k.ply",
            "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
            "property float z\nelement face 1\nproperty list uchar int vertex_indices\n"
            "end_header\n0 0 0\n1 0 0\n2 0 0\n3 0 1 2\n"),
      {.keep_degenerate = true});
  EXPECT_EQ(ply.triangles.size(), 1u);
  EXPECT_EQ(ply.degenerate_kept, 1u);
}

// ---- point clouds ----

void expect_cloud_error(const fs::path& file, const std::string& place, const std::string& reason) {
  try {
    read_point_cloud(file);
    ADD_FAILURE() << file << ": no error";
  } catch (const MeshReadError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(file.string() + place), std::string::npos) << msg;
    EXPECT_NE(msg.find(reason), std::string::npos) << msg;
  }
}

const char* kCloudHeader = "ply\nformat ascii 1.0\ncomment points\n";

TEST_F(MeshReader, PointCloudPlyAscii) {
  const PointCloud c = read_point_cloud(
      write("c.ply", std::string(kCloudHeader) +
                         "element vertex 3\nproperty float x\nproperty float y\nproperty float z\n"
                         "property uchar red\nend_header\n0 0 0 9\n1 2 3 9\n-1.5 0.25 1e3 9\n"));
  ASSERT_EQ(c.points.size(), 3u);
  EXPECT_TRUE(c.normals.empty());
  EXPECT_EQ(c.points[2], (std::array<double, 3>{-1.5, 0.25, 1000}));
}

TEST_F(MeshReader, PointCloudPlyWithNormalsAndFacesIgnored) {
  const PointCloud c = read_point_cloud(write(
      "n.ply", std::string(kCloudHeader) +
                   "element junk 9223372036854775807\nelement vertex 2\nproperty double x\n"
                   "property double y\nproperty double z\nproperty double nx\nproperty double ny\n"
                   "property double nz\nelement face 1\nproperty list uchar int vertex_indices\n"
                   "end_header\n0 0 0 0 0 1\n1 1 1 1 0 0\n3 0 1 1\n"));
  ASSERT_EQ(c.points.size(), 2u);
  ASSERT_EQ(c.normals.size(), 2u);
  EXPECT_EQ(c.normals[1], (std::array<double, 3>{1, 0, 0}));
}

std::string binary_cloud(std::endian order, bool doubles, int points) {
  const char* type = doubles ? "double" : "float";
  std::string out = std::string("ply\nformat ") +
                    (order == std::endian::little ? "binary_little_endian" : "binary_big_endian") +
                    " 1.0\nelement vertex " + std::to_string(points) + "\nproperty " + type +
                    " x\nproperty " + type + " y\nproperty " + type + " z\nproperty " + type +
                    " nx\nproperty " + type + " ny\nproperty " + type + " nz\nend_header\n";
  auto put = [&](auto value) {
    char bytes[sizeof value];
    std::memcpy(bytes, &value, sizeof value);
    if (order != std::endian::native) std::reverse(bytes, bytes + sizeof value);
    out.append(bytes, sizeof value);
  };
  for (int i = 0; i < points; ++i)
    for (double v : {double(i), 2.0 * i, 0.5, 0.0, 0.0, 1.0}) {
      if (doubles)
        put(v);
      else
        put(static_cast<float>(v));
    }
  return out;
}

TEST_F(MeshReader, PointCloudPlyBinary) {
  for (const bool doubles : {false, true})
    for (const auto order : {std::endian::little, std::endian::big}) {
      const PointCloud c = read_point_cloud(write("b.ply", binary_cloud(order, doubles, 4)));
      ASSERT_EQ(c.points.size(), 4u);
      ASSERT_EQ(c.normals.size(), 4u);
      EXPECT_EQ(c.points[3], (std::array<double, 3>{3, 6, 0.5}));
      EXPECT_EQ(c.normals[3], (std::array<double, 3>{0, 0, 1}));
    }
}

// The point reader checks the counts against the end of the data as the mesh reader does: more
// points than the header counts (ascii, binary both endians, with and without a later element),
// and an ascii line with a value too many or too few (which would shift every later value).
TEST_F(MeshReader, PointCloudPlyCountsAndLinesChecked) {
  const std::string rows = "0 0 0\n1 0 0\n0 1 0\n0 0 1\n";
  const std::string head = std::string(kCloudHeader) +
                           "element vertex 2\nproperty float x\nproperty float y\n"
                           "property float z\n";
  expect_cloud_error(write("few.ply", head + "end_header\n" + rows),
                     ":11:", "data follows the last element");
  for (const auto order : {std::endian::little, std::endian::big}) {
    std::string four = binary_cloud(order, false, 4);
    four.replace(four.find("vertex 4"), 8, "vertex 2");
    expect_cloud_error(write("few_binary.ply", four), ": byte offset",
                       "data follows the last element");
    const std::size_t end = four.find("end_header");
    four.insert(end, "element face 0\nproperty list uchar int vertex_indices\n");
    expect_cloud_error(write("few_binary_faces.ply", four), ": byte offset",
                       "data follows the last element");
  }
  const std::string four = std::string(kCloudHeader) +
                           "element vertex 4\nproperty float x\nproperty float y\n"
                           "property float z\nend_header\n";
  expect_cloud_error(write("stray.ply", four + "0 0 0\n1 0 0 7\n0 1 0\n0 0 1\n"),
                     ":10:", "more values than element 'vertex' (x y z)");
  expect_cloud_error(write("short.ply", four + "0 0 0\n1 0\n0 1 0\n0 0 1\n"),
                     ":10:", "fewer values than element 'vertex' (x y z)");
  // The mesh reader shares the line check.
  expect_error(write("stray_face.ply",
                     "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\n"
                     "property float y\nproperty float z\nelement face 1\n"
                     "property list uchar int vertex_indices\nend_header\n"
                     "0 0 0\n1 0 0\n0 1 0\n3 0 1 2 2\n"),
               ":13:", "more values than element 'face' (vertex_indices[])");
}

TEST_F(MeshReader, PointCloudXyz) {
  const PointCloud a = read_point_cloud(write("a.xyz", "# scan\n0 0 0\n1 2 3  # near\n\n4 5 6\n"));
  ASSERT_EQ(a.points.size(), 3u);
  EXPECT_TRUE(a.normals.empty());
  EXPECT_EQ(a.points[1], (std::array<double, 3>{1, 2, 3}));
  const PointCloud b = read_point_cloud(write("b.csv", "1,2,3,0,0,1\r\n4, 5, 6, 1, 0, 0\n"));
  ASSERT_EQ(b.normals.size(), 2u);
  EXPECT_EQ(b.points[1], (std::array<double, 3>{4, 5, 6}));
  EXPECT_EQ(b.normals[1], (std::array<double, 3>{1, 0, 0}));
  const PointCloud c = read_point_cloud(write("c.csv", "id,Z,y,x,r\n7,3,2,1,0\n8,6,5,4,0\n"));
  ASSERT_EQ(c.points.size(), 2u);
  EXPECT_EQ(c.points[0], (std::array<double, 3>{1, 2, 3}));
}

TEST_F(MeshReader, PointCloudMalformed) {
  expect_cloud_error(write("w.xyz", "0 0 0\n1 zero 2\n"), ":2:", "'zero' is not a number");
  expect_cloud_error(write("n.xyz", "0 0 0\n1 2\n"), ":2:", "2 values, but 3 on the lines before");
  expect_cloud_error(write("f.xyz", "0 0 0 1\n"), ":1:", "expected 3 values (x y z) or 6");
  expect_cloud_error(write("e.csv", "0,,0\n"), ":1:", "field 2 is empty");
  expect_cloud_error(write("h.csv", "a,b,c\n1,2,3\n"), ":1:", "must name the columns x, y and z");
  expect_cloud_error(write("p.csv", "x,y,z,nx\n1,2,3,4\n"), ":1:", "some of nx, ny, nz");
  expect_cloud_error(write("i.xyz", "0 0 0\n1 inf 2\n"), ":2:", "not a finite number");
  expect_cloud_error(write("r.xyz", "0 0 1e39\n"), ":1:", "beyond the float32 range");
  expect_cloud_error(write("z.xyz", "# nothing\n\n"), ": the point cloud is empty", "no points");
  expect_cloud_error(write("q.pcd", "x\n"), ": unknown point-cloud format", ".pcd");
  expect_cloud_error(dir_ / "missing.xyz", ": cannot open", "does it exist");
  const std::string full = binary_cloud(std::endian::little, true, 3);
  expect_cloud_error(write("t.ply", full.substr(0, full.size() - 5)), ": byte offset",
                     "the file ends early");
  expect_cloud_error(write("nv.ply", std::string(kCloudHeader) + "element face 0\nend_header\n"),
                     ": the PLY header", "no 'vertex' element");
  expect_cloud_error(write("nz.ply", std::string(kCloudHeader) +
                                         "element vertex 1\nproperty float x\nproperty float y\n"
                                         "end_header\n0 0\n"),
                     ": the PLY vertex element", "lacks x, y or z");
  expect_cloud_error(
      write("pn.ply", std::string(kCloudHeader) +
                          "element vertex 1\nproperty float x\nproperty float y\n"
                          "property float z\nproperty float nx\nend_header\n0 0 0 1\n"),
      ": the PLY vertex element", "some of nx, ny, nz");
  expect_cloud_error(write("bad.ply", std::string(kCloudHeader) +
                                          "element vertex 2\nproperty float x\nproperty float y\n"
                                          "property float z\nend_header\n0 0 0\n1 nan? 2\n"),
                     ":10:", "'nan?' is not a valid number");
  expect_cloud_error(write("ee.ply", std::string(kCloudHeader) +
                                         "element vertex 0\nproperty float x\nproperty float y\n"
                                         "property float z\nend_header\n"),
                     ": the point cloud is empty", "no points");
}

// Headers that lie or are not what they claim (issue 19): counts smaller than the file holds
// would drop data without a word; an element without properties holds no bytes whatever its
// count; a list count beyond any integer; coordinates the float device arithmetic cannot hold.
TEST_F(MeshReader, HeadersThatLie) {
  const std::string square = "0 0 0\n1 0 0\n1 1 0\n0 1 0\n1.5 0.5 0.5\n";
  expect_error(write("few.off", "OFF\n5 1 0\n" + square + "4 0 1 2 3\n3 1 4 2\n"),
               ":9:", "more lines follow the 1 faces");
  expect_error(write("g.off", "garbageOFF\n5 1 0\n" + square + "4 0 1 2 3\n"),
               ":1:", "expected the keyword 'OFF'");
  expect_error(write("4.off", "4OFF\n5 1 0\n" + square + "4 0 1 2 3\n"),
               ":1:", "expected the keyword 'OFF'");
  EXPECT_EQ(read_mesh(write("c.off", "COFF\n5 1 0\n" + square + "4 0 1 2 3\n")).triangles.size(),
            2u);
  const std::string ply_head =
      "ply\nformat ascii 1.0\nelement vertex 5\nproperty float x\nproperty float y\n"
      "property float z\nelement face 1\nproperty list uchar int vertex_indices\n";
  expect_error(write("few.ply", ply_head + "end_header\n" + square + "4 0 1 2 3\n3 1 4 2\n"), ":16",
               "data follows the last element");
  const auto junk = read_mesh(write("junk.ply", ply_head +
                                                    "element junk 9223372036854775807\n"
                                                    "end_header\n" +
                                                    square + "4 0 1 2 3\n"));
  EXPECT_EQ(junk.triangles.size(), 2u);
  expect_error(write("list.ply",
                     "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\n"
                     "property float y\nproperty float z\nelement face 1\n"
                     "property list float int vertex_indices\nend_header\n"
                     "0 0 0\n1 0 0\n0 1 0\n7e22 0 1 2\n"),
               ":13", "out of range");
  expect_error(write("big.obj", "v 0 0 0\nv 1e39 0 0\nv 0 1 0\nf 1 2 3\n"),
               ":2:", "beyond the float range");
}

}  // namespace
}  // namespace apron::io
