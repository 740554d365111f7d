// Mesh readers: every format (OBJ, PLY, OFF, STL) reads the same mesh; malformed files fail with
// file, place, reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

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
  void expect_error(const fs::path& file, const std::string& place, const std::string& reason,
                    const MeshReadOptions& options = {}) {
    try {
      read_mesh(file, options);
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
  expect_error(write("m.step", "solid\n"), ": unknown mesh format", ".step");
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

// ---- STL ----

using Point = std::array<double, 3>;
using Corners = std::array<Point, 3>;

// The box [0.5, 2.5] x [-1, 2] x [2, 6] (numbers a float holds exactly, so binary STL loses
// nothing): corner i has x from bit 0, y from bit 1, z from bit 2; 12 triangles wound outward.
Point cube_vertex(std::uint32_t i) {
  return {i & 1 ? 2.5 : 0.5, i & 2 ? 2.0 : -1.0, i & 4 ? 6.0 : 2.0};
}
const std::array<std::array<std::uint32_t, 3>, 12> kCubeTriangles = {{{0, 2, 3},
                                                                      {0, 3, 1},
                                                                      {4, 5, 7},
                                                                      {4, 7, 6},
                                                                      {0, 1, 5},
                                                                      {0, 5, 4},
                                                                      {2, 6, 7},
                                                                      {2, 7, 3},
                                                                      {0, 4, 6},
                                                                      {0, 6, 2},
                                                                      {1, 3, 7},
                                                                      {1, 7, 5}}};

std::vector<Corners> cube_facets(Point offset = {0, 0, 0}) {
  std::vector<Corners> facets;
  for (const auto& t : kCubeTriangles) {
    Corners c;
    for (int k = 0; k < 3; ++k)
      for (int d = 0; d < 3; ++d) c[k][d] = cube_vertex(t[k])[d] + offset[d];
    facets.push_back(c);
  }
  return facets;
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

std::string ascii_solid(const std::string& name, const std::vector<Corners>& facets) {
  std::string out = "solid " + name + "\n";
  for (const Corners& f : facets) {
    out += "  facet normal 0 0 0\n    outer loop\n";
    for (const Point& p : f)
      out += "      vertex " + number(p[0]) + " " + number(p[1]) + " " + number(p[2]) + "\n";
    out += "    endloop\n  endfacet\n";
  }
  return out + "endsolid " + name + "\n";
}

// Binary STL; `count` is what the file says (the number of facets unless a test makes it lie).
std::string binary_stl(const std::string& header, const std::vector<Corners>& facets,
                       std::uint32_t count) {
  std::string out = header;
  out.resize(80, '\0');
  auto put = [&](auto value) {  // little endian, as STL is
    char bytes[sizeof value];
    std::memcpy(bytes, &value, sizeof value);
    if (std::endian::native == std::endian::big) std::reverse(bytes, bytes + sizeof value);
    out.append(bytes, sizeof value);
  };
  put(count);
  for (const Corners& f : facets) {
    for (int d = 0; d < 3; ++d) put(0.0f);  // the normal, which readers ignore
    for (const Point& p : f)
      for (double c : p) put(static_cast<float>(c));
    put(std::uint16_t{0});
  }
  return out;
}
std::string binary_stl(const std::string& header, const std::vector<Corners>& facets) {
  return binary_stl(header, facets, static_cast<std::uint32_t>(facets.size()));
}

// The triangles as corner coordinates, each rotated to start at its smallest corner (winding
// kept), sorted: equal for two reads of one surface whatever their vertex numbering.
std::vector<Corners> geometry(const TriangleMesh& m) {
  std::vector<Corners> out;
  for (const auto& t : m.triangles) {
    Corners c{m.vertices[t[0]], m.vertices[t[1]], m.vertices[t[2]]};
    std::rotate(c.begin(), std::min_element(c.begin(), c.end()), c.end());
    out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void expect_welded_cube(const TriangleMesh& m) {
  EXPECT_EQ(m.vertices.size(), 8u);
  EXPECT_EQ(m.triangles.size(), 12u);
  EXPECT_EQ(m.polygons, 12u);
  EXPECT_EQ(m.vertices_read, 36u);
  EXPECT_EQ(m.welded_vertices, 28u);
  EXPECT_EQ(m.degenerate_skipped, 0u);
  TriangleMesh expected;
  for (std::uint32_t i = 0; i < 8; ++i) expected.vertices.push_back(cube_vertex(i));
  expected.triangles.assign(kCubeTriangles.begin(), kCubeTriangles.end());
  EXPECT_EQ(geometry(m), geometry(expected));
}

TEST_F(MeshReader, StlAscii) {
  const TriangleMesh m = read_mesh(write("cube.stl", ascii_solid("cube", cube_facets())));
  expect_welded_cube(m);
  ASSERT_EQ(m.solids.size(), 1u);
  EXPECT_EQ(m.solids[0].name, "cube");
  EXPECT_EQ(m.solids[0].first, 0u);
  EXPECT_EQ(m.solids[0].count, 12u);
  // What exporters also write: upper case, a facet on one line, '+' signs, CRLF, a nameless solid.
  std::string loose = "SOLID\r\n";
  for (const Corners& f : cube_facets()) {
    loose += "FACET NORMAL +0 -0 1e0 OUTER LOOP";
    for (const Point& p : f)
      loose += " VERTEX +" + number(p[0]) + " " + number(p[1]) + " " + number(p[2]);
    loose += " ENDLOOP ENDFACET\r\n";
  }
  const TriangleMesh l = read_mesh(write("loose.STL", loose + "ENDSOLID\r\n"));
  expect_welded_cube(l);
  ASSERT_EQ(l.solids.size(), 1u);
  EXPECT_EQ(l.solids[0].name, "");
}

TEST_F(MeshReader, StlBinary) {
  const TriangleMesh m =
      read_stl(write("cube.stl", binary_stl("made by apron's tests", cube_facets())));
  expect_welded_cube(m);
  ASSERT_EQ(m.solids.size(), 1u);
  EXPECT_EQ(m.solids[0].name, "made by apron's tests");
  EXPECT_EQ(m.solids[0].count, 12u);
}

// Many exporters begin the binary header with "solid": the byte count decides, not the word.
TEST_F(MeshReader, StlBinaryWithSolidHeader) {
  const std::string bytes = binary_stl("solid cube", cube_facets());
  expect_welded_cube(read_mesh(write("solid.stl", bytes)));
  // Truncated, it is still told from ascii (its bytes are not text) and refused as binary.
  expect_error(write("cut.stl", bytes.substr(0, bytes.size() - 30)), ": byte offset 634",
               "begins with 'solid' but is not ascii STL");
}

TEST_F(MeshReader, StlSeveralSolids) {
  std::vector<Corners> tetra = {{{{5, 0, 0}, {6, 0, 0}, {5, 1, 0}}},
                                {{{5, 0, 0}, {5, 0, 1}, {6, 0, 0}}},
                                {{{5, 0, 0}, {5, 1, 0}, {5, 0, 1}}},
                                {{{6, 0, 0}, {5, 0, 1}, {5, 1, 0}}}};
  const TriangleMesh m = read_mesh(
      write("two.stl", ascii_solid("tank", cube_facets()) + ascii_solid("obstacle one", tetra)));
  ASSERT_EQ(m.solids.size(), 2u);
  EXPECT_EQ(m.solids[0].name, "tank");
  EXPECT_EQ(m.solids[0].first, 0u);
  EXPECT_EQ(m.solids[0].count, 12u);
  EXPECT_EQ(m.solids[1].name, "obstacle one");
  EXPECT_EQ(m.solids[1].first, 12u);
  EXPECT_EQ(m.solids[1].count, 4u);
  EXPECT_EQ(m.vertices.size(), 12u);
  EXPECT_EQ(m.triangles[12][0], 8u);  // the tetrahedron's first corner, the 9th vertex made
}

TEST_F(MeshReader, StlWelding) {
  // Every corner moved by its own 1e-9 .. 3.6e-8 along x: within the default tolerance (1e-6 of
  // the diagonal, 5.4e-6), apart for exact welding only.
  std::vector<Corners> jittered = cube_facets();
  for (std::size_t f = 0; f < jittered.size(); ++f)
    for (int k = 0; k < 3; ++k) jittered[f][k][0] += 1e-9 * static_cast<double>(3 * f + k + 1);
  const fs::path file = write("jitter.stl", ascii_solid("j", jittered));
  const TriangleMesh m = read_mesh(file);
  EXPECT_EQ(m.vertices.size(), 8u);
  EXPECT_EQ(m.welded_vertices, 28u);
  // Each vertex is the first corner that reached it, as read.
  EXPECT_EQ(m.vertices[0], jittered[0][0]);
  const TriangleMesh exact = read_mesh(file, {.weld_relative = 0});
  EXPECT_EQ(exact.vertices.size(), 36u);
  EXPECT_EQ(exact.welded_vertices, 0u);
  EXPECT_EQ(read_mesh(file, {.weld_relative = 0, .weld_absolute = 1e-7}).vertices.size(), 8u);
  // A tolerance wider than the mesh welds every corner into one: nothing left.
  expect_error(file, ": the mesh is empty", "12 zero-area triangles skipped",
               {.weld_absolute = 1e308});
  // A facet whose corners weld together has no area left: skipped and counted, or kept.
  std::vector<Corners> sliver = cube_facets();
  sliver.push_back({{{0.5, -1, 2}, {0.5 + 1e-9, -1, 2}, {2.5, 2, 6}}});
  const fs::path s = write("sliver.stl", binary_stl("", sliver));
  const TriangleMesh skipped = read_mesh(s);
  EXPECT_EQ(skipped.triangles.size(), 12u);
  EXPECT_EQ(skipped.degenerate_skipped, 1u);
  EXPECT_EQ(skipped.solids[0].count, 12u);
  const TriangleMesh kept = read_mesh(s, {.keep_degenerate = true});
  EXPECT_EQ(kept.triangles.size(), 13u);
  EXPECT_EQ(kept.degenerate_kept, 1u);
  EXPECT_EQ(kept.triangles[12][0], kept.triangles[12][1]);
}

// One box from all four formats: the same triangles, corner for corner, winding included.
TEST_F(MeshReader, StlSameCubeAsObjPlyOff) {
  std::string obj, off = "OFF\n8 12 0\n", ply_faces;
  for (std::uint32_t i = 0; i < 8; ++i) {
    const Point p = cube_vertex(i);
    const std::string xyz = number(p[0]) + " " + number(p[1]) + " " + number(p[2]) + "\n";
    obj += "v " + xyz;
    off += xyz;
    ply_faces += xyz;
  }
  std::string faces;
  for (const auto& t : kCubeTriangles) {
    obj += "f " + std::to_string(t[0] + 1) + " " + std::to_string(t[1] + 1) + " " +
           std::to_string(t[2] + 1) + "\n";
    faces += "3 " + std::to_string(t[0]) + " " + std::to_string(t[1]) + " " + std::to_string(t[2]) +
             "\n";
  }
  const std::string ply =
      "ply\nformat ascii 1.0\nelement vertex 8\nproperty double x\nproperty double y\n"
      "property double z\nelement face 12\nproperty list uchar int vertex_indices\nend_header\n" +
      ply_faces + faces;
  const auto reference = geometry(read_mesh(write("c.obj", obj)));
  EXPECT_EQ(geometry(read_mesh(write("c.off", off + faces))), reference);
  EXPECT_EQ(geometry(read_mesh(write("c.ply", ply))), reference);
  EXPECT_EQ(geometry(read_mesh(write("a.stl", ascii_solid("c", cube_facets())))), reference);
  EXPECT_EQ(geometry(read_mesh(write("b.stl", binary_stl("", cube_facets())))), reference);
}

TEST_F(MeshReader, StlMalformedBinary) {
  const std::string cube = binary_stl("", cube_facets());  // 84 + 12 x 50 = 684 bytes
  expect_error(write("empty.stl", ""), ": the file is empty", "0 bytes");
  expect_error(write("cut.stl", cube.substr(0, 674)), ": byte offset 634",
               "the file ends inside triangle 11: its triangle count (byte offset 80) declares 12");
  expect_error(write("long.stl", cube + "1234567"), ": byte offset 684",
               "7 bytes follow the last triangle");
  expect_error(write("more.stl", binary_stl("", cube_facets(), 13)), ": byte offset 684",
               "declares 13 triangles, 734 bytes in all");
  // A count no memory holds, in a small file: refused by the size, before anything is allocated.
  expect_error(write("huge.stl", binary_stl("", cube_facets(), 0xFFFFFFFFu)), ": byte offset 684",
               "declares 4294967295 triangles");
  // A count that does fit the file, but not the memory the read may use.
  expect_error(write("mem.stl", cube), ": byte offset 80", "reading this STL needs about",
               {.available_bytes = 1000});
  std::string nan = cube;
  const float bad = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(nan.data() + 84 + 3 * 50 + 12 + 12 + 4, &bad, 4);  // triangle 3, vertex 1, y
  expect_error(write("nan.stl", nan), ": byte offset 258",
               "triangle 3, vertex 1 has a coordinate that is not a finite number");
  std::string inf = cube;
  const float infinite = std::numeric_limits<float>::infinity();
  std::memcpy(inf.data() + 84 + 12, &infinite, 4);
  expect_error(write("inf.stl", inf), ": byte offset 96", "not a finite number");
  // Not STL at all: text that does not begin with "solid", long or shorter than a header.
  expect_error(write("obj.stl", std::string(kObj) + kObj), ": byte offset 80",
               "not an STL file: it is text but does not begin with 'solid'");
  std::string noise = cube;  // binary, but not "solid" and not the count's size
  noise[0] = '\x7f';
  expect_error(write("noise.stl", noise + "xy"), ": byte offset 684",
               "2 bytes follow the last triangle");
  expect_error(write("short.stl", "v 0 0 0\n"), ": not an STL file", "fewer than a binary STL's");
  expect_error(write("bin.stl", "solid x\n\x01\x02"), ": byte offset 8", "not an STL file");
}

TEST_F(MeshReader, StlMalformedAscii) {
  const std::string head = "solid s\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\n";
  const std::string tail = "endloop\nendfacet\nendsolid s\n";
  expect_error(write("after.stl", head + "vertex 0 1 0\n" + tail + "endsolid\n"),
               ":10:", "expected 'solid' (another solid) after 'endsolid', found 'endsolid'");
  expect_error(write("four.stl", head + "vertex 0 1 0\nvertex 1 1 0\n" + tail),
               ":7:", "a 4th vertex in the facet begun at line 2");
  expect_error(write("two.stl", head + tail),
               ":6:", "the facet begun at line 2 has 2 vertices; an STL facet is a triangle");
  expect_error(write("loop.stl", head + "vertex 0 1 0\nendfacet\nendsolid s\n"),
               ":7:", "expected 'endloop' after the facet's 3 vertices, found 'endfacet'");
  expect_error(write("facet.stl", head + "vertex 0 1 0\nendloop\nendsolid s\n"),
               ":8:", "expected 'endfacet' in the facet begun at line 2, found 'endsolid'");
  expect_error(write("solid.stl", head + "vertex 0 1 0\nendloop\nendfacet\n"),
               ":9:", "the file ends inside solid 's' (begun at line 1): 'endsolid' is missing");
  expect_error(write("cut.stl", head + "vertex 0 1"),
               ":6:", "the file ends inside the facet begun at line 2");
  expect_error(write("word.stl", "solid s\nfacet normal 0 0 1\nouter lop\n"),
               ":3:", "expected 'loop' in the facet begun at line 2, found 'lop'");
  expect_error(write("stray.stl", "solid s\nvertex 0 0 0\n"),
               ":2:", "expected 'facet' or 'endsolid' in solid 's', found 'vertex'");
  expect_error(write("nan.stl", head + "vertex 0 nan 0\n" + tail),
               ":6:", "facet 0, vertex 2 has a coordinate that is not a finite number");
  expect_error(write("inf.stl", head + "vertex 0 -inf 0\n" + tail), ":6:", "not a finite number");
  expect_error(write("big.stl", head + "vertex 0 1e39 0\n" + tail),
               ":6:", "beyond the float range");
  expect_error(write("word2.stl", head + "vertex 0 one 0\n" + tail),
               ":6:", "'one' is not a number");
  expect_error(write("none.stl", "solid nothing\nendsolid nothing\n"), ": the mesh is empty",
               "its solids hold no facets");
  expect_error(write("mem.stl", head + "vertex 0 1 0\n" + tail), ": reading this STL needs",
               "split the mesh", {.available_bytes = 100});
  expect_error(write("tol.stl", head + "vertex 0 1 0\n" + tail), ": the weld tolerances",
               "finite and >= 0", {.weld_relative = -1});
}

// The meshes the SPH cases use (inputs/meshes/make_stl.py): the dam break's tank, closed and
// open-topped, and the L-shaped obstacle on its floor. Closed means every edge has two
// triangles, wound against each other; outward means a positive signed volume.
struct EdgeCount {
  std::size_t unpaired = 0;  // edges with one triangle (an open mesh's rim)
  bool consistent = true;    // no edge met twice in the same direction
};
EdgeCount edges_of(const TriangleMesh& m) {
  std::map<std::pair<std::uint32_t, std::uint32_t>, int> directed;
  for (const auto& t : m.triangles)
    for (int k = 0; k < 3; ++k) ++directed[{t[k], t[(k + 1) % 3]}];
  EdgeCount out;
  for (const auto& [edge, n] : directed) {
    if (n != 1) out.consistent = false;
    if (!directed.count({edge.second, edge.first})) ++out.unpaired;
  }
  return out;
}
double signed_volume(const TriangleMesh& m) {
  double v = 0;
  for (const auto& t : m.triangles) {
    const Point &a = m.vertices[t[0]], &b = m.vertices[t[1]], &c = m.vertices[t[2]];
    v += a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0]) +
         a[2] * (b[0] * c[1] - b[1] * c[0]);
  }
  return v / 6;
}

TEST_F(MeshReader, StlShippedMeshes) {
  const fs::path dir = fs::path(APRON_INPUTS_DIR) / "meshes";
  const double tank_volume = 0.584 * 0.0438 * 0.365;  // inputs/dam_break.yaml's boundary.tank
  const TriangleMesh tank = read_mesh(dir / "dam_break_tank.stl");
  EXPECT_EQ(tank.vertices.size(), 8u);
  EXPECT_EQ(tank.triangles.size(), 12u);
  EXPECT_EQ(edges_of(tank).unpaired, 0u);
  EXPECT_TRUE(edges_of(tank).consistent);
  EXPECT_NEAR(signed_volume(tank), tank_volume, 1e-9 * tank_volume);
  const TriangleMesh open = read_mesh(dir / "dam_break_tank_open.stl");
  EXPECT_EQ(open.vertices.size(), 8u);
  EXPECT_EQ(open.triangles.size(), 10u);
  EXPECT_EQ(edges_of(open).unpaired, 4u);  // the rim at the top
  EXPECT_TRUE(edges_of(open).consistent);
  const TriangleMesh block = read_mesh(dir / "l_block.stl");
  EXPECT_EQ(block.vertices.size(), 12u);
  EXPECT_EQ(block.triangles.size(), 20u);
  EXPECT_EQ(edges_of(block).unpaired, 0u);
  EXPECT_TRUE(edges_of(block).consistent);
  const double l_volume = (0.1 * 0.03 + 0.03 * 0.07) * 0.0438;
  EXPECT_NEAR(signed_volume(block), l_volume, 1e-6 * l_volume);
  const Point tank_hi = {0.584, 0.0438, 0.365};
  Point lo = block.vertices[0], hi = lo;
  for (const Point& p : block.vertices)
    for (int d = 0; d < 3; ++d) lo[d] = std::min(lo[d], p[d]), hi[d] = std::max(hi[d], p[d]);
  EXPECT_EQ(lo[2], 0.0);  // on the floor, spanning the tank's y, inside it in x
  EXPECT_EQ(lo[1], 0.0);
  EXPECT_EQ(hi[1], tank_hi[1]);
  EXPECT_GT(lo[0], 0.146);  // downstream of the water column
  EXPECT_LT(hi[0], tank_hi[0]);
  EXPECT_LT(hi[2], tank_hi[2]);
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
