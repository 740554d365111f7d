// libFuzzer target: `apron inspect --verify` (io::inspect) on an HDF5 file made of the input
// bytes: a checkpoint or a particle output file, or anything else. Blind mutation of HDF5 rarely
// gets past the superblock, so the seed corpus is small valid files apron wrote (run.sh says how
// to make more). std::runtime_error (a refusal naming the file and the reason) is the expected
// failure; any other exception, a crash, a sanitizer report or a hang is a finding. Written
// against the public API only (io/checkpoint.hpp).
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <typeinfo>

#include "fuzz_files.hpp"
#include "io/checkpoint.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path& work_dir() {
  return apron::fuzz::work_dir("fuzz_checkpoint");
}

void finish() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // Open MPI unloads its components at MPI_Finalize; LeakSanitizer could then not name the
  // libraries of their allocations, and tests/fuzz/lsan.supp would not match them.
  setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", 0);
  MPI_Init(argc, argv);
  std::atexit(finish);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fs::path path = work_dir() / "input.h5";
  apron::fuzz::write_input(path, data, size);
  try {
    const auto [text, ok] = apron::io::inspect(path, /*verify=*/true);
    (void)text;
    (void)ok;
  } catch (const std::runtime_error&) {
    // Refused with a message: the expected outcome for bad input.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_checkpoint: unexpected %s: %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz_checkpoint: unexpected exception of unknown type\n");
    std::abort();
  }
  return 0;
}
