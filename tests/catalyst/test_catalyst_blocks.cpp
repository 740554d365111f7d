// The adaptor's three kinds of VisualBlock (points, image, mesh) through the built-in writer
// pipeline on every rank: each channel's parallel VTK file appears with one piece per rank.
// tests/catalyst/check_blocks.py then reads them back with ParaView.
#include <gtest/gtest.h>
#include <mpi.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "io/catalyst_adaptor.hpp"

namespace apron::io {
namespace {

namespace fs = std::filesystem;

TEST(CatalystBlocks, PointsImageAndMeshPieces) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const fs::path dir = fs::path(APRON_BINARY_DIR) / "test-runs" / "catalyst" / "blocks";

  // Points: 4 per rank, along x at height `rank`.
  std::vector<float> point_xyz;
  std::vector<std::int32_t> point_rank(4, rank);
  for (int i = 0; i < 4; ++i) point_xyz.insert(point_xyz.end(), {float(i), 0.f, float(rank)});
  VisualBlock points;
  points.channel = "points";
  points.points = 4;
  points.point_fields = {{"position", Dtype::f32, 3, point_xyz.data()},
                         {"rank", Dtype::i32, 1, point_rank.data()}};

  // Image: a 3 x 3 x 2 point slab per rank, stacked in z (slabs share their boundary plane).
  VisualBlock image;
  image.channel = "grid";
  image.kind = VisualBlock::Kind::image;
  image.extent = {0, 2, 0, 2, rank, rank + 1};
  image.whole_extent = {0, 2, 0, 2, 0, size};
  image.spacing = {0.5, 0.5, 1.0};
  image.points = 18;
  std::vector<double> value(18);
  for (int i = 0; i < 18; ++i) value[i] = 100.0 * rank + i;
  image.point_fields = {{"value", Dtype::f64, 1, value.data()}};

  // Mesh: a unit square of 2 triangles per rank, with a cell field.
  std::vector<double> corner_xyz = {0, 0, double(rank), 1, 0, double(rank),
                                    1, 1, double(rank), 0, 1, double(rank)};
  std::vector<std::int64_t> triangles = {0, 1, 2, 0, 2, 3};
  std::vector<float> area = {0.5f, 0.5f};
  VisualBlock mesh;
  mesh.channel = "mesh";
  mesh.kind = VisualBlock::Kind::mesh;
  mesh.points = 4;
  mesh.point_fields = {{"position", Dtype::f64, 3, corner_xyz.data()}};
  mesh.cells = 2;
  mesh.connectivity = triangles.data();
  mesh.cell_fields = {{"area", Dtype::f32, 1, area.data()}};

  {
    CatalystAdaptor adaptor(MPI_COMM_WORLD, {{}, true, dir});
    const VisualBlock blocks[] = {points, image, mesh};
    adaptor.execute(3, 0.25, blocks);
    EXPECT_EQ(adaptor.errors(), 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (const char* file : {"points_000003.pvtp", "grid_000003.pvti", "mesh_000003.pvtu"})
    EXPECT_TRUE(fs::exists(dir / "catalyst" / file)) << file;
}

}  // namespace
}  // namespace apron::io
