// Neighbour-to-neighbour byte transport for device buffers. With the CUDA backend and one GPU per
// rank NCCL sends device buffers GPU to GPU; otherwise (ranks sharing a GPU, APRON_TRANSPORT=mpi,
// or NCCL failing to start) MPI messages are staged through pinned host memory. The OpenMP
// backend's device memory is host memory and goes to MPI directly.
#pragma once

#include <mpi.h>

#include <set>
#include <vector>

#include "kernels/common/device_buffers.hpp"

namespace apron {

struct TransportStats {
  double seconds = 0;  // host time in exchanges (with NCCL the queuing only: transfers are async)
  std::size_t bytes_sent = 0;
  std::size_t messages = 0;
};

class Transport {
 public:
  explicit Transport(MPI_Comm comm);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Sends send[send_offsets[k] .. send_offsets[k+1]) to peers[k] and receives from each peer
  // into recv (grown to hold them, never shrunk; recv_offsets filled). Message sizes are
  // exchanged first; empty messages are skipped.
  void exchange(const std::vector<int>& peers, const ByteVector& send,
                const std::vector<std::size_t>& send_offsets, ByteVector& recv,
                std::vector<std::size_t>& recv_offsets);
  // The same where every receiver knows its message sizes already: recv_offsets is given and
  // recv must be large enough.
  void exchange_known_sizes(const std::vector<int>& peers, const ByteVector& send,
                            const std::vector<std::size_t>& send_offsets, ByteVector& recv,
                            const std::vector<std::size_t>& recv_offsets);
  // exchange_known_sizes() in halves: start posts the messages, wait() completes them (recv
  // then holds them). Between the two, send and recv must not be touched. One exchange per
  // transport at a time (std::logic_error otherwise). With NCCL the transfers are queued on
  // the device stream, behind the packing and ahead of what reads them, and wait() has nothing
  // to do; with MPI, wait() completes the messages (and stages them onto the device).
  void start_known_sizes(const std::vector<int>& peers, const ByteVector& send,
                         const std::vector<std::size_t>& send_offsets, ByteVector& recv,
                         const std::vector<std::size_t>& recv_offsets);
  void wait();
  // Collective over the communicator: values[0 .. count) summed element-wise over all ranks,
  // in place. With NCCL on the device, queued on the default stream like the exchanges (no
  // host wait); otherwise through MPI (staged through pinned host memory with CUDA).
  void sum_in_place(float* values, std::size_t count);
  void sum_in_place(double* values, std::size_t count);
  // Collective over the peers: sets up the links to those not connected yet, so that the first
  // halo of the step loop does not pay for it (NCCL connects each peer and channel on first use:
  // ~40 ms a channel on two H200). Nothing to do for MPI.
  void connect(const std::vector<int>& peers);
  const TransportStats& stats() const { return stats_; }
  MPI_Comm comm() const { return comm_; }
  const char* name() const;

 private:
  std::vector<unsigned long long> exchange_sizes(const std::vector<int>& peers,
                                                 const std::vector<std::size_t>& send_offsets);
  template <class T>
  void sum_values(T* values, std::size_t count);
  void exchange_nccl(const std::vector<int>& peers, const ByteVector& send,
                     const std::vector<std::size_t>& send_offsets, ByteVector& recv,
                     const std::vector<std::size_t>& recv_offsets);
  void start_mpi(const std::vector<int>& peers, const ByteVector& send,
                 const std::vector<std::size_t>& send_offsets, ByteVector& recv,
                 const std::vector<std::size_t>& recv_offsets);

  MPI_Comm comm_;
  void* nccl_ = nullptr;  // ncclComm_t when NCCL carries the messages
  TransportStats stats_;
  std::set<int> connected_;  // peers connect() has linked to
  PinnedBuffer pinned_send_, pinned_recv_;
  // The exchange in flight between start_known_sizes() and wait().
  struct InFlight {
    bool active = false;
    std::vector<MPI_Request> requests;
    ByteVector* recv = nullptr;  // staged from pinned_recv_ on wait() where it lives on a GPU
    std::size_t recv_total = 0;
  } in_flight_;
};

}  // namespace apron
