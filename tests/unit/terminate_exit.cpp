// terminate_exit KIND: an exception where it cannot be caught, as apron's command line sets things
// up (install_terminate_handler). KIND omp_bad_alloc: std::bad_alloc thrown inside an OpenMP
// parallel region (issue 19: a 2M-triangle mesh under `ulimit -v` ended in "terminate called",
// SIGABRT); thread_error: std::runtime_error escaping a std::thread. Either must end with exit
// status 1 and a message naming what failed and the phase, never a signal (the ctest checks).
#include <mpi.h>
#include <omp.h>

#include <cstring>
#include <new>
#include <stdexcept>
#include <thread>

#include "runtime/runtime.hpp"

int main(int argc, char** argv) {
  apron::MpiSession mpi(argc, argv);
  apron::install_terminate_handler();
  apron::PhaseTimers timers;
  auto phase = timers.scope("fill");
  const char* kind = argc > 1 ? argv[1] : "";
  if (std::strcmp(kind, "omp_bad_alloc") == 0) {
#pragma omp parallel num_threads(2)
    {
      if (omp_get_thread_num() == omp_get_num_threads() - 1) throw std::bad_alloc();
    }
  } else if (std::strcmp(kind, "thread_error") == 0) {
    std::thread([] { throw std::runtime_error("deliberate failure on a thread"); }).join();
  }
  return 0;  // the test fails: status 0
}
