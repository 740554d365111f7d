// apron: the command-line program (src/cli.cpp) with the built-in workloads.
#include "cli.hpp"
#include "runtime/openmp_wait.hpp"

int main(int argc, char** argv) {
  apron::default_openmp_waiting(argv);  // may restart the program, before MPI starts
  return apron::run_cli(argc, argv);
}
