#include "decomposition/transport.hpp"

#include <mpi.h>

#include <chrono>
#include <stdexcept>

#if defined(APRON_BACKEND_CUDA)
#include <cuda_runtime.h>
#endif

namespace apron {
namespace {

#if defined(APRON_BACKEND_CUDA)
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
// Grows a pinned host buffer to at least `bytes` (pinned memory makes the staging copies run at
// full PCIe/NVLink-C2C speed and lets them overlap).
void reserve_pinned(std::byte*& buffer, std::size_t& size, std::size_t bytes) {
  if (bytes <= size) return;
  if (buffer) cudaFreeHost(buffer);
  size = bytes + bytes / 4;
  check(cudaMallocHost(reinterpret_cast<void**>(&buffer), size), "cudaMallocHost");
}
#endif

}  // namespace

Transport::Transport(MPI_Comm comm) : comm_(comm) {}

Transport::~Transport() {
#if defined(APRON_BACKEND_CUDA)
  if (pinned_send_) cudaFreeHost(pinned_send_);
  if (pinned_recv_) cudaFreeHost(pinned_recv_);
#endif
}

const char* Transport::name() const {
#if defined(APRON_BACKEND_CUDA)
  return "mpi-pinned-host-staging";
#else
  return "mpi-host";
#endif
}

void Transport::exchange(const std::vector<int>& peers, const ByteVector& send,
                         const std::vector<std::size_t>& send_offsets, ByteVector& recv,
                         std::vector<std::size_t>& recv_offsets) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t npeers = peers.size();
  constexpr int kSizeTag = 701, kDataTag = 702;

  // 1. Message sizes.
  std::vector<unsigned long long> send_sizes(npeers), recv_sizes(npeers);
  std::vector<MPI_Request> requests;
  requests.reserve(2 * npeers);
  for (std::size_t k = 0; k < npeers; ++k) {
    send_sizes[k] = send_offsets[k + 1] - send_offsets[k];
    requests.emplace_back();
    MPI_Irecv(&recv_sizes[k], 1, MPI_UNSIGNED_LONG_LONG, peers[k], kSizeTag, comm_,
              &requests.back());
    requests.emplace_back();
    MPI_Isend(&send_sizes[k], 1, MPI_UNSIGNED_LONG_LONG, peers[k], kSizeTag, comm_,
              &requests.back());
  }
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);

  recv_offsets.assign(npeers + 1, 0);
  for (std::size_t k = 0; k < npeers; ++k) recv_offsets[k + 1] = recv_offsets[k] + recv_sizes[k];
  recv.resize(recv_offsets[npeers]);
  const std::size_t send_total = send_offsets[npeers];

  // 2. Payloads, staged through host memory where device memory is not host memory.
  const std::byte* send_host = raw(send);
  std::byte* recv_host = raw(recv);
#if defined(APRON_BACKEND_CUDA)
  reserve_pinned(pinned_send_, pinned_send_size_, send_total);
  reserve_pinned(pinned_recv_, pinned_recv_size_, recv_offsets[npeers]);
  if (send_total)
    check(cudaMemcpy(pinned_send_, raw(send), send_total, cudaMemcpyDeviceToHost), "stage send");
  send_host = pinned_send_;
  recv_host = pinned_recv_;
#endif
  requests.clear();
  for (std::size_t k = 0; k < npeers; ++k) {
    if (recv_sizes[k]) {
      requests.emplace_back();
      MPI_Irecv(recv_host + recv_offsets[k], static_cast<int>(recv_sizes[k]), MPI_BYTE, peers[k],
                kDataTag, comm_, &requests.back());
    }
    if (send_sizes[k]) {
      requests.emplace_back();
      MPI_Isend(send_host + send_offsets[k], static_cast<int>(send_sizes[k]), MPI_BYTE, peers[k],
                kDataTag, comm_, &requests.back());
      ++stats_.messages;
    }
  }
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
#if defined(APRON_BACKEND_CUDA)
  if (recv_offsets[npeers])
    check(cudaMemcpy(raw(recv), pinned_recv_, recv_offsets[npeers], cudaMemcpyHostToDevice),
          "stage receive");
#endif
  stats_.bytes_sent += send_total;
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace apron
