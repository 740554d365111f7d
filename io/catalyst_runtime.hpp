// The boundary between apron and ParaView: the in-situ runtime lives in a module of its own
// (io/catalyst_paraview.cpp, built as a shared module) that the Catalyst adaptor loads when a
// run asks for it. Linked into apron, ParaView's ~400 shared libraries cost every process
// (every run, rank and test) about 0.6 s of symbol lookup at start, Catalyst or not. The module
// calls apron's collective helpers (io/hdf5_file.hpp) in the program that loads it.
#pragma once

#include <mpi.h>

#include <span>
#include <string>

#include "io/catalyst_adaptor.hpp"

namespace apron::io {

class CatalystRuntime {
 public:
  virtual ~CatalystRuntime() = default;  // finalises ParaView's processor: before MPI_Finalize
  // Collective. Hands this step's blocks to every pipeline that wants them at this step.
  virtual void execute(long step, double time, std::span<const VisualBlock> blocks) = 0;
  // This rank's script failures since the last call, as they are to be reported (no final
  // newline); "" if none.
  virtual std::string take_failures() = 0;
};

// The module's one entry point, looked up by this name. Collective: starts ParaView's in-situ
// runtime on comm and loads the scripts (a script that does not load is a failure to report).
using MakeCatalystRuntime = CatalystRuntime*(MPI_Comm comm, const CatalystSettings& settings);
inline constexpr const char* kMakeCatalystRuntime = "apron_make_catalyst_runtime";

}  // namespace apron::io
