#include "runtime/runtime.hpp"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <limits>
#include <new>

#include "kernels/common/backend.hpp"

#if defined(APRON_DEVICE_CUDA)
#include <cuda_runtime.h>
#endif

namespace apron {

MpiSession::MpiSession(int& argc, char**& argv) {
  // Open MPI's MPI-IO (OMPIO) opens a shared-file-pointer helper with every file, and its "sm"
  // component keeps a named semaphore in /dev/shm named after the file: one left locked (a run
  // killed inside it, or /dev/shm full) makes every later run hang opening a file of that name,
  // particles_000000.h5.tmp the first. apron never uses shared file pointers, so it is left out
  // unless the user chose (tests/cli/stale_semaphore.sh); the lock file that OMPIO then uses on
  // one node, as it does on many, lives beside the file and goes with it.
  setenv("OMPI_MCA_sharedfp", "^sm", 0);
  MPI_Init(&argc, &argv);
}
MpiSession::~MpiSession() {
  stop_device_runtime();
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

#if !defined(APRON_DEVICE_CUDA)
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

// What this process may still map under `ulimit -v` (RLIMIT_AS): a job's limit is its memory.
std::size_t address_space_left() {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
    return std::numeric_limits<std::size_t>::max();
  std::ifstream status("/proc/self/status");
  std::string key;
  std::size_t kb = 0;
  while (status >> key) {
    if (key == "VmSize:" && status >> kb) break;
    status.ignore(256, '\n');
  }
  const std::size_t used = kb * 1024;
  return limit.rlim_cur > used ? limit.rlim_cur - used : 0;
}
}  // namespace
#endif

DeviceInfo DeviceInfo::select(const RankInfo& ranks) {
  DeviceInfo d;
  d.backend = backend_name();
  d.threads = omp_get_max_threads();
#if defined(APRON_DEVICE_CUDA)
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
  d.free_bytes = std::min(host_available_bytes() / ranks.local_size, address_space_left());
#endif
  return d;
}

std::string DeviceInfo::libraries() {
  return backend_libraries();
}

void Log::error_all(const std::string& message) {
  std::string line = "apron: error";
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) line += " (rank " + std::to_string(rank_) + ")";
  line += ": " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);  // one write, as warn()'s
}

namespace {
std::atomic<const char*> current_phase{nullptr};  // read by std::terminate on any thread
std::atomic<const char*> failing_phase{nullptr};  // the innermost phase an exception left
}  // namespace

PhaseTimers::Scope::Scope(PhaseTimers& t, const char* phase)
    : timers_(t),
      phase_(phase),
      outer_(current_phase.exchange(phase)),
      uncaught_(std::uncaught_exceptions()),
      start_(std::chrono::steady_clock::now()) {
  failing_phase = nullptr;  // a failure before this phase began was handled
}

PhaseTimers::Scope::~Scope() {
  current_phase = outer_;
  if (std::uncaught_exceptions() > uncaught_) {
    // Unwinding: no device sync (the device may be what failed); the innermost phase is named.
    const char* none = nullptr;
    failing_phase.compare_exchange_strong(none, phase_);
  } else {
    device_synchronize();
  }
  try {
    timers_.add(phase_,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  } catch (const std::bad_alloc&) {
    // While unwinding from running out of memory: the time is lost, the failure is reported.
  }
}

void PhaseTimers::add(const std::string& phase, double seconds) {
  if (!seconds_.count(phase)) order_.push_back(phase);
  seconds_[phase] += seconds;
}

double PhaseTimers::seconds(const std::string& phase) const {
  auto it = seconds_.find(phase);
  return it == seconds_.end() ? 0 : it->second;
}

std::string failed_phase() {
  const char* phase = failing_phase.load();
  if (phase == nullptr) phase = current_phase.load();
  return phase == nullptr ? "" : phase;
}

std::string out_of_memory_message(const std::string& what) {
  std::string text = "out of memory (" + what + ")";
  if (const std::string phase = failed_phase(); !phase.empty()) text += " in phase '" + phase + "'";
  char figures[200] = "";
#if defined(APRON_DEVICE_CUDA)
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
    std::snprintf(figures, sizeof figures, "; %.3g of the GPU's %.3g GB are free", free_bytes / 1e9,
                  total_bytes / 1e9);
#else
  std::snprintf(figures, sizeof figures, "; the node has %.3g GB of memory available",
                host_available_bytes() / 1e9);
#endif
  text += figures;
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    std::snprintf(figures, sizeof figures, ", and this process may use %.3g GB (ulimit -v)",
                  static_cast<double>(limit.rlim_cur) / 1e9);
    text += figures;
  }
  return text + ": run on more ranks or nodes, or make the case smaller";
}

void install_terminate_handler() {
  std::set_terminate([] {
    std::string message = "terminated";
    if (const std::exception_ptr failure = std::current_exception()) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::bad_alloc& e) {
        message = out_of_memory_message(e.what());
      } catch (const std::exception& e) {
        message = e.what();
        if (const std::string phase = failed_phase(); !phase.empty())
          message += " (in phase '" + phase + "')";
      } catch (...) {
        message = "an unknown exception";
      }
    }
    Log::error_all(message);
    int initialized = 0, finalized = 0, size = 1;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, 1);  // the other ranks may wait in a collective
    std::_Exit(1);
  });
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace apron
