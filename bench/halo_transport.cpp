// Halo transport latency and bandwidth: every rank exchanges one message of each size with every
// other rank through apron's Transport (NCCL or MPI, as a run would choose), with and without the
// size handshake. Prints the median time per exchange of 50 after 5 warm-ups, on rank 0.
// usage: mpirun -n 2 halo_transport
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "decomposition/transport.hpp"
#include "runtime/runtime.hpp"

namespace {

template <class F>
double median_seconds(MPI_Comm comm, F exchange) {
  std::vector<double> seconds;
  for (int run = 0; run < 55; ++run) {
    apron::device_synchronize();
    MPI_Barrier(comm);
    const auto start = std::chrono::steady_clock::now();
    exchange();
    apron::device_synchronize();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, comm);  // the slowest rank's
    if (run >= 5) seconds.push_back(s);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    const apron::RankInfo ranks = apron::RankInfo::world();
    apron::DeviceInfo::select(ranks);  // one GPU per rank on a node, as apron run does
    MPI_Comm comm = ranks.comm;
    const int rank = ranks.rank, size = ranks.size;
    std::vector<int> peers;
    for (int r = 0; r < size; ++r)
      if (r != rank) peers.push_back(r);
    apron::Transport transport(comm);
    if (rank == 0)
      std::printf("transport %s, %d ranks, %zu peer(s) each\n%12s %14s %14s %10s\n",
                  transport.name(), size, peers.size(), "bytes/peer", "exchange [us]",
                  "known size [us]", "GB/s");
    for (std::size_t bytes : {std::size_t{16}, std::size_t{1} << 16, std::size_t{1} << 20,
                              std::size_t{4} << 20, std::size_t{16} << 20}) {
      apron::ByteVector send(bytes * peers.size()), recv(bytes * peers.size());
      std::vector<std::size_t> offsets(peers.size() + 1);
      for (std::size_t k = 0; k <= peers.size(); ++k) offsets[k] = k * bytes;
      std::vector<std::size_t> recv_offsets;
      const double with_sizes = median_seconds(
          comm, [&] { transport.exchange(peers, send, offsets, recv, recv_offsets); });
      const double known = median_seconds(
          comm, [&] { transport.exchange_known_sizes(peers, send, offsets, recv, offsets); });
      if (rank == 0)
        std::printf("%12zu %14.1f %14.1f %10.2f\n", bytes, with_sizes * 1e6, known * 1e6,
                    static_cast<double>(bytes) / known / 1e9);
    }
  }
  MPI_Finalize();
  return 0;
}
