// apron: the command-line program (src/cli.cpp) with the built-in workloads.
#include "cli.hpp"

int main(int argc, char** argv) {
  return apron::run_cli(argc, argv);
}
