// Checkpoints of named tables (io/checkpoint.hpp) on however many ranks the test is launched with
// (1, 2 and 3 in ctest): two tables with different per-rank row counts (one rank holding no
// bricks), a replicated array, scalars and a case text over 64 KiB; read back on the same ranks
// (each rank its own rows), and on fewer ranks (an even contiguous share, every row once).
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"

namespace io = apron::io;
namespace fs = std::filesystem;

namespace {

void expect(MPI_Comm comm, bool ok, const std::string& what) {
  int bad = ok ? 0 : 1, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm);
  if (any != 0) throw std::runtime_error("FAIL: " + what);
  if (io::rank_of(comm) == 0) std::printf("ok    %s\n", what.c_str());
}

std::size_t bricks_of(int rank) {
  return rank == 1 ? 0 : 3 + 2 * static_cast<std::size_t>(rank);
}
std::size_t vertices_of(int rank) {
  return 10 + static_cast<std::size_t>(rank);
}

// Every table's values are a function of the global row.
double brick_value(std::uint64_t row, int c) {
  return 1000.0 * row + c;
}
std::int64_t vertex_value(std::uint64_t row) {
  return 7 * static_cast<std::int64_t>(row) - 3;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    if (argc != 2) throw std::runtime_error("usage: test_checkpoint_tables DIR");
    const MPI_Comm world = MPI_COMM_WORLD;
    const int rank = io::rank_of(world), ranks = io::size_of(world);
    const fs::path file = fs::path(argv[1]) / "checkpoint_000000042.h5";
    if (rank == 0) fs::create_directories(argv[1]);

    std::uint64_t brick_first = 0, vertex_first = 0;
    {
      const std::size_t nb = bricks_of(rank), nv = vertices_of(rank);
      MPI_Exscan(&nb, &brick_first, 1, MPI_UINT64_T, MPI_SUM, world);
      MPI_Exscan(&nv, &vertex_first, 1, MPI_UINT64_T, MPI_SUM, world);
      if (rank == 0) brick_first = vertex_first = 0;
    }
    std::vector<double> bricks;
    for (std::size_t i = 0; i < bricks_of(rank); ++i)
      for (int c = 0; c < 4; ++c) bricks.push_back(brick_value(brick_first + i, c));
    std::vector<std::int64_t> vertices;
    for (std::size_t i = 0; i < vertices_of(rank); ++i)
      vertices.push_back(vertex_value(vertex_first + i));
    const std::vector<double> boxes(6 * ranks, 0.5);

    io::CheckpointState state;
    state.header.workload = "test";
    state.header.case_name = "tables";
    state.header.config_text = std::string(100000, 'y');  // over 64 KiB
    state.header.step = 42;
    state.header.time = 1.5;
    state.header.dt = 0.01;
    state.header.ranks = ranks;
    state.header.scalars = {{"counter", 3}};
    state.tables.push_back(
        {"bricks", bricks_of(rank), {{{"values", io::Dtype::f64, 4, bricks.data()}, {}}}});
    state.tables.push_back(
        {"vertices", vertices_of(rank), {{{"id", io::Dtype::i64, 1, vertices.data()}, {}}}});
    state.replicated.push_back(
        {{"boxes", io::Dtype::f64, 6, boxes.data()}, static_cast<std::size_t>(ranks)});
    io::PendingCheckpoint pending = io::save_checkpoint(world, file, state);
    const io::CheckpointWritten written = pending.finish();
    expect(world, fs::exists(file) && !fs::exists(file.string() + ".tmp"),
           "the checkpoint is in place, no .tmp");
    expect(world, written.bytes > 0, "bytes counted");

    {
      const io::CheckpointReader in(world, file, "test");
      expect(world, in.tables() == std::vector<std::string>{"bricks", "vertices"}, "tables()");
      std::uint64_t nb = 0, nv = 0;
      for (int r = 0; r < ranks; ++r) nb += bricks_of(r), nv += vertices_of(r);
      expect(world, in.rows("bricks") == nb && in.rows("vertices") == nv, "rows per table");
      bool counts = in.rank_rows("bricks").size() == static_cast<std::size_t>(ranks);
      for (int r = 0; counts && r < ranks; ++r)
        counts = in.rank_rows("bricks")[r] == static_cast<std::int64_t>(bricks_of(r)) &&
                 in.rank_rows("vertices")[r] == static_cast<std::int64_t>(vertices_of(r));
      expect(world, counts, "per-rank counts per table");
      expect(world,
             in.header().step == 42 && in.header().time == 1.5 &&
                 in.header().config_text == state.header.config_text &&
                 in.header().scalars.at("counter") == 3,
             "header, scalars and the 100 kB case text");
      const io::TableShare share = io::share_of(in, "bricks");
      std::vector<double> back(4 * share.count);
      const io::ColumnTarget columns[] = {{"values", io::Dtype::f64, back.data()}};
      io::read_share(in, "bricks", share, columns);
      expect(world, share.own_rows && share.first == brick_first && back == bricks,
             "same ranks: each rank its own brick rows, bitwise");
      const io::TableShare vshare = io::share_of(in, "vertices");
      std::vector<std::int64_t> vback(vshare.count);
      in.read("vertices", "id", io::Dtype::i64, vshare.first, vshare.count, vback.data());
      expect(world, vback == vertices, "same ranks: each rank its own vertex rows");
      std::vector<double> boxes_back(6 * in.replicated_rows("boxes"));
      in.read_all("boxes", io::Dtype::f64, boxes_back.data());
      expect(world, boxes_back == boxes, "replicated array");
    }

    // Fewer ranks (or one): an even contiguous share each, all rows once, checksums verified.
    const int readers = ranks > 1 ? ranks - 1 : 1;
    MPI_Comm sub;
    MPI_Comm_split(world, rank < readers ? 0 : MPI_UNDEFINED, rank, &sub);
    bool ok = true;
    if (sub != MPI_COMM_NULL) {
      const io::CheckpointReader in(sub, file, "test");
      for (const char* table : {"bricks", "vertices"}) {
        const io::TableShare share = io::share_of(in, table);
        const std::uint64_t total = in.rows(table);
        ok = ok && share.own_rows == (readers == ranks) &&
             (readers == ranks || (share.first == total * rank / readers &&
                                   share.first + share.count == total * (rank + 1) / readers));
        if (std::string(table) == "bricks") {
          std::vector<double> back(4 * share.count);
          in.read(table, "values", io::Dtype::f64, share.first, share.count, back.data());
          for (std::uint64_t i = 0; i < share.count; ++i)
            for (int c = 0; c < 4; ++c)
              ok = ok && back[4 * i + c] == brick_value(share.first + i, c);
        } else {
          std::vector<std::int64_t> back(share.count);
          in.read(table, "id", io::Dtype::i64, share.first, share.count, back.data());
          for (std::uint64_t i = 0; i < share.count; ++i)
            ok = ok && back[i] == vertex_value(share.first + i);
        }
      }
      MPI_Comm_free(&sub);
    }
    expect(world, ok, "on " + std::to_string(readers) + " rank(s): even shares, values by row");

    // Another workload's name is refused; a missing table is an error naming it.
    bool refused = false;
    try {
      const io::CheckpointReader in(world, file, "flip");
    } catch (const std::runtime_error& e) {
      refused = std::string(e.what()).find("'test' workload") != std::string::npos;
    }
    expect(world, refused, "another workload is refused");
    refused = false;
    try {
      const io::CheckpointReader in(world, file, "test");
      (void)in.rows("triangles");
    } catch (const std::runtime_error& e) {
      refused = std::string(e.what()).find("no table 'triangles'") != std::string::npos;
    }
    expect(world, refused, "a missing table is named");
    if (rank == 0) fs::remove_all(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    status = 1;
  }
  int worst = 0;
  MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
