// SeriesWriter on however many ranks it is launched with (1, 2 and 3 in ctest): a point set, a
// triangle mesh and image bricks, two steps each, rank 1 holding nothing; then a resume at step 1
// and a step 3, and steps_on_disk(). Writes into the directory given as argv[1];
// test_series_xdmf.py reads the files back with h5py and checks the values (a function of the
// global row and the rank count) and that every .xmf is valid XML whose data items name datasets of
// the right shape.
#include <mpi.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "io/series_output.hpp"

namespace io = apron::io;

namespace {

std::uint64_t offset_of(std::uint64_t mine) {
  std::uint64_t offset = 0;
  MPI_Exscan(&mine, &offset, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return io::rank_of(MPI_COMM_WORLD) == 0 ? 0 : offset;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_points(io::SeriesWriter& w, long step, int rank) {
  const std::size_t n = rank == 1 ? 0 : 5 + 2 * static_cast<std::size_t>(rank);
  const std::uint64_t first = offset_of(n);
  std::vector<float> position, value;
  std::vector<std::int64_t> id;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(first + i);
    position.insert(position.end(), {float(g), float(2 * g), float(3 * g + step)});
    value.push_back(static_cast<float>(0.5 * g));
    id.push_back(static_cast<std::int64_t>(first + i));
  }
  const io::HostField fields[] = {{"position", io::Dtype::f32, 3, position.data()},
                                  {"value", io::Dtype::f32, 1, value.data()},
                                  {"id", io::Dtype::i64, 1, id.data()}};
  w.write(step, 0.25 * step, io::PointSetPart{n, fields});
}

void write_mesh(io::SeriesWriter& w, long step, int rank) {
  const bool empty = rank == 1;
  std::vector<double> position;
  std::vector<double> height;
  std::vector<std::int32_t> owner;
  std::vector<std::uint32_t> triangles;
  if (!empty) {
    for (int i = 0; i < 4; ++i) {
      position.insert(position.end(), {double(i % 2), double(i / 2), double(rank + step)});
      height.push_back(rank + 0.1 * i);
    }
    triangles = {0, 1, 2, 1, 3, 2};
    owner = {rank, rank};
  }
  const io::HostField vertex_fields[] = {{"position", io::Dtype::f64, 3, position.data()},
                                         {"height", io::Dtype::f64, 1, height.data()}};
  const io::HostField triangle_fields[] = {{"owner", io::Dtype::i32, 1, owner.data()}};
  io::TriangleMeshPart part;
  part.vertices = empty ? 0 : 4;
  part.vertex_fields = vertex_fields;
  part.triangles = empty ? 0 : 2;
  part.connectivity = triangles.data();
  part.triangle_fields = triangle_fields;
  w.write(step, 0.25 * step, part);
}

void write_bricks(io::SeriesWriter& w, long step, int rank) {
  std::vector<io::ImageBrick> bricks;
  const int count = rank == 1 ? 0 : rank + 1;
  std::size_t rows = 0;
  for (int k = 0; k < count; ++k) {
    io::ImageBrick b;
    b.origin = {10.0 * rank + 3 * k, 0, double(step)};
    b.spacing = {0.5, 0.25, 1};
    b.dims = {2 + k, 3, 2};
    rows += static_cast<std::size_t>(b.dims[0] * b.dims[1] * b.dims[2]);
    bricks.push_back(b);
  }
  const std::uint64_t first = offset_of(rows);
  std::vector<float> phi, vel;
  for (std::size_t i = 0; i < rows; ++i) {
    const auto g = static_cast<float>(first + i);
    phi.push_back(g);
    vel.insert(vel.end(), {g, -g, 2 * g});
  }
  const io::HostField fields[] = {{"phi", io::Dtype::f32, 1, phi.data()},
                                  {"vel", io::Dtype::f32, 3, vel.data()}};
  w.write(step, 0.25 * step, io::BrickSetPart{bricks, fields, false});
}

void expect(bool ok, const std::string& what) {
  int bad = ok ? 0 : 1, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any != 0) throw std::runtime_error("FAIL: " + what);
  if (io::rank_of(MPI_COMM_WORLD) == 0) std::printf("ok    %s\n", what.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    if (argc != 2) throw std::runtime_error("usage: test_series_output DIR");
    const std::filesystem::path dir = argv[1];
    const int rank = io::rank_of(MPI_COMM_WORLD);
    {
      io::SeriesWriter points(MPI_COMM_WORLD, dir, "points");
      io::SeriesWriter mesh(MPI_COMM_WORLD, dir, "mesh");
      io::SeriesWriter bricks(MPI_COMM_WORLD, dir, "bricks");
      for (long step : {1L, 2L}) {
        write_points(points, step, rank);
        write_mesh(mesh, step, rank);
        write_bricks(bricks, step, rank);
      }
      expect(points.steps_on_disk() == std::vector<long>{1, 2}, "steps_on_disk lists steps 1, 2");
    }
    // A restart at step 1 leaves the index as it was until its first write (a restart that fails
    // before it has changed nothing), which lists step 1 and the new step 3, not the abandoned
    // step 2; a copy under another name keeps both of the first run.
    for (const std::string name : {"points", "mesh", "bricks"}) {
      const auto xmf = dir / (name + ".xmf"), both = dir / (name + "_both.xmf.txt");
      std::filesystem::copy_file(xmf, both, std::filesystem::copy_options::overwrite_existing);
      io::SeriesWriter again(MPI_COMM_WORLD, dir, name);
      MPI_Barrier(MPI_COMM_WORLD);
      again.resume(1, 0.25);
      expect(read_file(xmf) == read_file(both), name + ".xmf: unchanged by the resume alone");
      if (name == "points") write_points(again, 3, rank);
      if (name == "mesh") write_mesh(again, 3, rank);
      if (name == "bricks") write_bricks(again, 3, rank);
    }
    // A checkpoint whose step or time disagrees with the files on disk (step 1 at the time of
    // step 2, or step 2 at the time of step 1) is refused before the series index is touched.
    for (const auto& [step, time] : {std::pair{1L, 0.5}, std::pair{2L, 0.25}}) {
      io::SeriesWriter again(MPI_COMM_WORLD, dir, "points");
      const auto before = std::filesystem::last_write_time(dir / "points.xmf");
      bool refused = false;
      try {
        again.resume(step, time);
      } catch (const std::runtime_error& e) {
        refused =
            std::string(e.what()).find("disagrees with the output series") != std::string::npos;
      }
      expect(refused, "a checkpoint at a step and time the series on disk contradicts is refused");
      expect(std::filesystem::last_write_time(dir / "points.xmf") == before,
             "the refused resume leaves the series index as it was");
    }
    // Wrong arguments throw on every rank.
    io::SeriesWriter bad(MPI_COMM_WORLD, dir / "bad", "bad");
    bool threw = false;
    try {
      std::vector<std::uint32_t> tri = {0, 1, 7};
      std::vector<double> pos(9, 0.0);
      const io::HostField vf[] = {{"position", io::Dtype::f64, 3, pos.data()}};
      io::TriangleMeshPart part;
      part.vertices = 3;
      part.vertex_fields = vf;
      part.triangles = rank == 0 ? 1 : 0;
      part.connectivity = tri.data();
      bad.write(1, 0.0, part);
    } catch (const std::invalid_argument&) {
      threw = true;
    } catch (const std::runtime_error&) {
      threw = true;
    }
    expect(threw, "a triangle naming a vertex the rank lacks throws on every rank");
    threw = false;
    try {
      const io::ImageBrick b{{0, 0, 0}, {1, 1, 0}, {2, 2, 2}};
      std::vector<float> v(8);
      const io::HostField f[] = {{"phi", io::Dtype::f32, 1, v.data()}};
      bad.write(1, 0.0, io::BrickSetPart{std::span(&b, rank == 0 ? 1 : 0), f, false});
    } catch (const std::exception&) {
      threw = true;
    }
    expect(threw, "a brick with zero spacing throws on every rank");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    status = 1;
  }
  int worst = 0;
  MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
