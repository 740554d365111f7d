// Process-wide runtime: MPI, the rank's device, the logger and the phase timers.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace apron {

class MpiSession {
 public:
  MpiSession(int& argc, char**& argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

struct RankInfo {
  MPI_Comm comm = MPI_COMM_WORLD;
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // rank among those on the same node
  int local_size = 1;
  static RankInfo world();
};

// The device this rank runs on: GPU local_rank % devices (CUDA) or the host's cores (OpenMP).
struct DeviceInfo {
  std::string backend;
  std::string name;
  int index = 0;
  int count = 0;
  std::size_t total_bytes = 0;
  std::size_t free_bytes =
      0;  // free device memory, or this rank's share of available host RAM (within its ulimit -v)
  int threads = 0;  // OpenMP threads
  static DeviceInfo select(const RankInfo& ranks);
  // The backend's library lines of `apron info`, each ending in a newline. Starts the device
  // runtime (Kokkos starts on first use): for `info` only.
  static std::string libraries();
};

// Rank 0 prints to stdout; every rank prints errors to stderr with its rank.
class Log {
 public:
  static void init(int rank) { rank_ = rank; }
  template <class... A>
  static void info(const char* fmt, A... args) {
    if (rank_ != 0) return;
    std::printf(fmt, args...);
    std::printf("\n");
    std::fflush(stdout);
  }
  // The whole line in one write: stderr is unbuffered, and a reader that merges it with stdout
  // (ctest, a batch system's log) could otherwise put other output inside the line.
  template <class... A>
  static void warn(const char* fmt, A... args) {
    if (rank_ != 0) return;
    const int length = std::snprintf(nullptr, 0, fmt, args...);
    if (length < 0) return;
    std::string line = "warning: ";
    const std::size_t start = line.size();
    line.resize(start + static_cast<std::size_t>(length) + 1);
    std::snprintf(line.data() + start, static_cast<std::size_t>(length) + 1, fmt, args...);
    line.back() = '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
  static void error_all(const std::string& message);  // from any rank, prefixed with the rank

 private:
  static inline int rank_ = 0;
};

// Wall-clock time per named phase. Phases are closed after device work completes (the device is
// synchronised), so the times are what the phase really cost.
class PhaseTimers {
 public:
  class Scope {
   public:
    Scope(PhaseTimers& t, const char* phase);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    PhaseTimers& timers_;
    const char* phase_;
    const char* outer_;  // the phase this one runs inside
    int uncaught_;       // std::uncaught_exceptions() when it began
    std::chrono::steady_clock::time_point start_;
  };
  Scope scope(const char* phase) { return Scope(*this, phase); }
  void add(const std::string& phase, double seconds);
  const std::vector<std::string>& order() const { return order_; }
  double seconds(const std::string& phase) const;

 private:
  std::map<std::string, double> seconds_;
  std::vector<std::string> order_;
};

double wall_seconds();  // monotonic

// The innermost PhaseTimers phase an exception left (or, while none has, the phase running now):
// what a failure message names. "" outside every phase.
std::string failed_phase();

// "out of memory (WHAT) in phase P on this rank: ..., with what this rank could still get and
// what to change": for std::bad_alloc, from the command line's handler or std::terminate.
std::string out_of_memory_message(const std::string& what);

// std::terminate (an exception escaping an OpenMP parallel region or a thread, where it cannot be
// caught) then prints what failed and where, and ends the run with exit status 1, not SIGABRT.
void install_terminate_handler();

}  // namespace apron
