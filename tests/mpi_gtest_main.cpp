// GoogleTest main for tests that need MPI (run directly or under mpirun). Only rank 0 prints
// the test listing; failures are printed on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include "kernels/common/backend.hpp"
#include "runtime/runtime.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  apron::DeviceInfo::select(apron::RankInfo::world());  // one GPU per rank, as apron does
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int result = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  apron::stop_device_runtime();
  MPI_Finalize();
  return worst;
}
