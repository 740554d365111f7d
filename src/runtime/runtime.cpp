#include "runtime/runtime.hpp"

#include <omp.h>
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "kernels/common/backend.hpp"

#if defined(APRON_BACKEND_CUDA)
#include <cuda_runtime.h>
#endif

namespace apron {

MpiSession::MpiSession(int& argc, char**& argv) {
  MPI_Init(&argc, &argv);
}
MpiSession::~MpiSession() {
  scratch_allocator().release_all();
  MPI_Finalize();
}

RankInfo RankInfo::world() {
  RankInfo r;
  MPI_Comm_rank(r.comm, &r.rank);
  MPI_Comm_size(r.comm, &r.size);
  MPI_Comm node;
  MPI_Comm_split_type(r.comm, MPI_COMM_TYPE_SHARED, r.rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &r.local_rank);
  MPI_Comm_size(node, &r.local_size);
  MPI_Comm_free(&node);
  return r;
}

#if !defined(APRON_BACKEND_CUDA)
namespace {
std::size_t host_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::size_t kb = 0;
  while (meminfo >> key >> kb) {
    if (key == "MemAvailable:") return kb * 1024;
    meminfo.ignore(256, '\n');
  }
  return 0;
}
}  // namespace
#endif

DeviceInfo DeviceInfo::select(const RankInfo& ranks) {
  DeviceInfo d;
  d.backend = backend_name();
  d.threads = omp_get_max_threads();
#if defined(APRON_BACKEND_CUDA)
  if (cudaGetDeviceCount(&d.count) != cudaSuccess || d.count == 0)
    throw std::runtime_error(
        "no CUDA device found (this is the CUDA build; use the omp build "
        "on machines without a GPU)");
  d.index = ranks.local_rank % d.count;
  cudaSetDevice(d.index);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, d.index);
  d.name = prop.name;
  cudaMemGetInfo(&d.free_bytes, &d.total_bytes);
  // Ranks sharing a GPU share its memory.
  const int sharing = (ranks.local_size + d.count - 1) / d.count;
  d.free_bytes /= sharing;
#else
  char host[256] = "host";
  gethostname(host, sizeof host);
  d.name = std::string("CPU (") + host + ", " + std::to_string(d.threads) + " threads)";
  d.count = 1;
  d.total_bytes = sysconf(_SC_PHYS_PAGES) * static_cast<std::size_t>(sysconf(_SC_PAGE_SIZE));
  d.free_bytes = host_available_bytes() / ranks.local_size;
#endif
  return d;
}

void Log::error_all(const std::string& message) {
  std::cerr << "apron: error";
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) std::cerr << " (rank " << rank_ << ")";
  std::cerr << ": " << message << std::endl;
}

PhaseTimers::Scope::Scope(PhaseTimers& t, const char* phase)
    : timers_(t), phase_(phase), start_(std::chrono::steady_clock::now()) {}

PhaseTimers::Scope::~Scope() {
  device_synchronize();
  timers_.add(phase_,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
}

void PhaseTimers::add(const std::string& phase, double seconds) {
  if (!seconds_.count(phase)) order_.push_back(phase);
  seconds_[phase] += seconds;
}

double PhaseTimers::seconds(const std::string& phase) const {
  auto it = seconds_.find(phase);
  return it == seconds_.end() ? 0 : it->second;
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace apron
