#include "decomposition/transport.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#if defined(APRON_DEVICE_CUDA)
#include <cuda_runtime.h>
#endif
#if defined(APRON_HAVE_NCCL)
#include <nccl.h>
#endif

namespace apron {
namespace {

#if defined(APRON_DEVICE_CUDA)
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#endif

#if defined(APRON_HAVE_NCCL)
void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(r));
}

// NCCL carries the halos when every rank has a GPU of its own (ranks sharing a GPU stay on MPI);
// APRON_TRANSPORT=mpi keeps MPI with pinned host staging. Every rank takes the same decision.
bool nccl_usable(MPI_Comm comm) {
  const char* chosen = std::getenv("APRON_TRANSPORT");
  int ok = !(chosen && std::string(chosen) == "mpi");
  MPI_Comm node;
  int rank = 0, local_size = 1, device = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &local_size);
  if (cudaGetDevice(&device) != cudaSuccess) ok = 0;
  std::vector<int> devices(local_size);
  MPI_Allgather(&device, 1, MPI_INT, devices.data(), 1, MPI_INT, node);
  MPI_Comm_free(&node);
  for (int a = 0; a < local_size; ++a)
    for (int b = a + 1; b < local_size; ++b)
      if (devices[a] == devices[b]) ok = 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
  int size = 1;
  MPI_Comm_size(comm, &size);
  return ok && size > 1;
}
#endif

// NCCL channels (one CTA each) a halo exchange may use.
constexpr int kChannels = 8;

}  // namespace

Transport::Transport(MPI_Comm comm) : comm_(comm) {
#if defined(APRON_HAVE_NCCL)
  if (!nccl_usable(comm)) return;
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  ncclUniqueId id;
  if (rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm);
  // A halo message is a few MB for one or two peers: 8 channels move 4 MB in 73 us on two
  // NVLink-connected H200, against 220 us on one and 32 (NCCL's default) no faster
  // (bench/halo_transport, bench/NOTES.md). NCCL_MAX_CTAS overrides.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.maxCTAs = kChannels;
  ncclComm_t nccl = nullptr;
  int started = ncclCommInitRankConfig(&nccl, size, id, rank, &config) == ncclSuccess;
  MPI_Allreduce(MPI_IN_PLACE, &started, 1, MPI_INT, MPI_MIN, comm);
  if (!started) {
    if (nccl) ncclCommDestroy(nccl);
    if (rank == 0)
      std::fprintf(stderr,
                   "apron: warning: NCCL could not start on every rank; halos go through MPI "
                   "with pinned host staging (NCCL_DEBUG=INFO says why)\n");
    return;
  }
  nccl_ = nccl;
#endif
}

Transport::~Transport() {
#if defined(APRON_HAVE_NCCL)
  if (nccl_) ncclCommDestroy(static_cast<ncclComm_t>(nccl_));
#endif
}

void Transport::connect(const std::vector<int>& peers) {
  std::vector<int> fresh;
  for (int peer : peers)
    if (connected_.insert(peer).second) fresh.push_back(peer);
  if (!nccl_ || fresh.empty()) return;
  // One message large enough to be spread over every channel, to and from each new peer (the
  // relation is symmetric, so both ends see each other as new).
  constexpr std::size_t kBytes = std::size_t{16} << 20;
  std::vector<std::size_t> offsets(fresh.size() + 1);
  for (std::size_t k = 0; k <= fresh.size(); ++k) offsets[k] = k * kBytes;
  ByteVector send(offsets.back()), recv(offsets.back());
  const TransportStats before = stats_;
  exchange_known_sizes(fresh, send, offsets, recv, offsets);
  stats_ = before;  // not halo traffic
}

const char* Transport::name() const {
  if (nccl_) return "nccl";
#if defined(APRON_DEVICE_CUDA)
  return "mpi-pinned-host-staging";
#else
  return "mpi-host";
#endif
}

std::vector<unsigned long long> Transport::exchange_sizes(
    const std::vector<int>& peers, const std::vector<std::size_t>& send_offsets) {
  constexpr int kSizeTag = 701;
  const std::size_t npeers = peers.size();
  std::vector<unsigned long long> send_sizes(npeers), recv_sizes(npeers);
  std::vector<MPI_Request> requests(2 * npeers);
  for (std::size_t k = 0; k < npeers; ++k) {
    send_sizes[k] = send_offsets[k + 1] - send_offsets[k];
    MPI_Irecv(&recv_sizes[k], 1, MPI_UNSIGNED_LONG_LONG, peers[k], kSizeTag, comm_,
              &requests[2 * k]);
    MPI_Isend(&send_sizes[k], 1, MPI_UNSIGNED_LONG_LONG, peers[k], kSizeTag, comm_,
              &requests[2 * k + 1]);
  }
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  return recv_sizes;
}

void Transport::exchange(const std::vector<int>& peers, const ByteVector& send,
                         const std::vector<std::size_t>& send_offsets, ByteVector& recv,
                         std::vector<std::size_t>& recv_offsets) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t npeers = peers.size();
  const auto recv_sizes = exchange_sizes(peers, send_offsets);
  recv_offsets.assign(npeers + 1, 0);
  for (std::size_t k = 0; k < npeers; ++k) recv_offsets[k + 1] = recv_offsets[k] + recv_sizes[k];
  grow(recv, recv_offsets[npeers]);
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  exchange_known_sizes(peers, send, send_offsets, recv, recv_offsets);
}

void Transport::exchange_known_sizes(const std::vector<int>& peers, const ByteVector& send,
                                     const std::vector<std::size_t>& send_offsets, ByteVector& recv,
                                     const std::vector<std::size_t>& recv_offsets) {
  start_known_sizes(peers, send, send_offsets, recv, recv_offsets);
  wait();
}

void Transport::start_known_sizes(const std::vector<int>& peers, const ByteVector& send,
                                  const std::vector<std::size_t>& send_offsets, ByteVector& recv,
                                  const std::vector<std::size_t>& recv_offsets) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t npeers = peers.size();
  if (in_flight_.active)
    throw std::logic_error("Transport: an exchange started while another is in flight");
  if (recv.size() < recv_offsets[npeers])
    throw std::logic_error("Transport: receive buffer smaller than the messages announced");
  in_flight_.active = true;
  if (nccl_) {
    exchange_nccl(peers, send, send_offsets, recv, recv_offsets);
  } else {
    start_mpi(peers, send, send_offsets, recv, recv_offsets);
  }
  for (std::size_t k = 0; k < npeers; ++k)
    if (send_offsets[k + 1] > send_offsets[k]) ++stats_.messages;
  stats_.bytes_sent += send_offsets[npeers];
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Transport::wait() {
  if (!in_flight_.active) throw std::logic_error("Transport: wait() without an exchange");
  const auto start = std::chrono::steady_clock::now();
  in_flight_.active = false;
  if (in_flight_.requests.empty() && in_flight_.recv_total == 0) return;  // NCCL, or nothing
  MPI_Waitall(static_cast<int>(in_flight_.requests.size()), in_flight_.requests.data(),
              MPI_STATUSES_IGNORE);
  in_flight_.requests.clear();
#if defined(APRON_DEVICE_CUDA)
  if (in_flight_.recv_total)
    check(cudaMemcpy(raw(*in_flight_.recv), pinned_recv_.data(), in_flight_.recv_total,
                     cudaMemcpyHostToDevice),
          "stage receive");
#endif
  in_flight_.recv_total = 0;
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Device buffers straight from GPU to GPU (NVLink where present), all peers in one group.
void Transport::exchange_nccl([[maybe_unused]] const std::vector<int>& peers,
                              [[maybe_unused]] const ByteVector& send,
                              [[maybe_unused]] const std::vector<std::size_t>& send_offsets,
                              [[maybe_unused]] ByteVector& recv,
                              [[maybe_unused]] const std::vector<std::size_t>& recv_offsets) {
#if defined(APRON_HAVE_NCCL)
  auto comm = static_cast<ncclComm_t>(nccl_);
  check(ncclGroupStart(), "ncclGroupStart");
  for (std::size_t k = 0; k < peers.size(); ++k) {
    const std::size_t out = send_offsets[k + 1] - send_offsets[k];
    const std::size_t in = recv_offsets[k + 1] - recv_offsets[k];
    if (in)
      check(ncclRecv(raw(recv) + recv_offsets[k], in, ncclUint8, peers[k], comm, 0), "ncclRecv");
    if (out)
      check(ncclSend(raw(send) + send_offsets[k], out, ncclUint8, peers[k], comm, 0), "ncclSend");
  }
  // No wait here: the transfers are queued on the default stream behind the kernels that packed
  // the messages and ahead of those that read them, so the host goes on queuing work. (Waiting
  // cost a host round trip per exchange: ~40 us each, hundreds per multigrid-preconditioned
  // pressure solve.)
  check(ncclGroupEnd(), "ncclGroupEnd");
#endif
}

void Transport::sum_in_place(float* values, std::size_t count) {
  sum_values(values, count);
}
void Transport::sum_in_place(double* values, std::size_t count) {
  sum_values(values, count);
}

template <class T>
void Transport::sum_values(T* values, std::size_t count) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  const auto start = std::chrono::steady_clock::now();
#if defined(APRON_HAVE_NCCL)
  if (nccl_) {
    const ncclDataType_t type = std::is_same_v<T, float> ? ncclFloat : ncclDouble;
    check(ncclAllReduce(values, values, count, type, ncclSum, static_cast<ncclComm_t>(nccl_), 0),
          "ncclAllReduce");
    stats_.seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return;
  }
#endif
  T* host = values;
#if defined(APRON_DEVICE_CUDA)
  pinned_send_.reserve(count * sizeof(T));
  host = reinterpret_cast<T*>(pinned_send_.data());
  check(cudaMemcpy(host, values, count * sizeof(T), cudaMemcpyDeviceToHost), "stage sum");
#endif
  const MPI_Datatype type = std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
  MPI_Allreduce(MPI_IN_PLACE, host, static_cast<int>(count), type, MPI_SUM, comm_);
#if defined(APRON_DEVICE_CUDA)
  check(cudaMemcpy(values, host, count * sizeof(T), cudaMemcpyHostToDevice), "stage sum");
#endif
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// MPI point-to-point, staged through pinned host memory where device memory is not host memory;
// wait() completes the requests.
void Transport::start_mpi(const std::vector<int>& peers, const ByteVector& send,
                          const std::vector<std::size_t>& send_offsets, ByteVector& recv,
                          const std::vector<std::size_t>& recv_offsets) {
  constexpr int kDataTag = 702;
  const std::size_t npeers = peers.size();
  const std::byte* send_host = raw(send);
  std::byte* recv_host = raw(recv);
#if defined(APRON_DEVICE_CUDA)
  const std::size_t send_total = send_offsets[npeers], recv_total = recv_offsets[npeers];
  // Pinned staging makes these copies run at full PCIe/NVLink-C2C speed.
  pinned_send_.reserve(send_total);
  pinned_recv_.reserve(recv_total);
  if (send_total)
    check(cudaMemcpy(pinned_send_.data(), raw(send), send_total, cudaMemcpyDeviceToHost),
          "stage send");
  send_host = pinned_send_.data();
  recv_host = pinned_recv_.data();
  in_flight_.recv = &recv;
  in_flight_.recv_total = recv_total;
#endif
  auto& requests = in_flight_.requests;
  requests.reserve(2 * npeers);
  for (std::size_t k = 0; k < npeers; ++k) {
    const std::size_t in = recv_offsets[k + 1] - recv_offsets[k];
    const std::size_t out = send_offsets[k + 1] - send_offsets[k];
    if (in) {
      requests.emplace_back();
      MPI_Irecv(recv_host + recv_offsets[k], static_cast<int>(in), MPI_BYTE, peers[k], kDataTag,
                comm_, &requests.back());
    }
    if (out) {
      requests.emplace_back();
      MPI_Isend(send_host + send_offsets[k], static_cast<int>(out), MPI_BYTE, peers[k], kDataTag,
                comm_, &requests.back());
    }
  }
}

}  // namespace apron
