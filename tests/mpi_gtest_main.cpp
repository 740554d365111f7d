// GoogleTest main for tests that need MPI (run directly or under mpirun). Only rank 0 prints
// the test listing; failures are printed on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include "runtime/runtime.hpp"

int main(int argc, char** argv) {
  int worst = 0;
  {
    const apron::MpiSession mpi(argc, argv);  // ends the device runtime, then MPI
    ::testing::InitGoogleTest(&argc, argv);
    apron::DeviceInfo::select(apron::RankInfo::world());  // one GPU per rank, as apron does
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0) {
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
    }
    const int result = RUN_ALL_TESTS();
    MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  }
  return worst;
}
