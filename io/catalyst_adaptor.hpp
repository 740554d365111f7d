// In-situ visualisation with ParaView Catalyst (the legacy vtkCPProcessor API). The driver hands
// every due step's VisualBlocks to execute(); Python Catalyst scripts (ParaView 5.9+ scripts
// with extractors, or plain ones defining catalyst_execute(info)) or, without scripts, a built-in
// pipeline that writes each channel as parallel VTK XML files (.pvtp, per-rank pieces) process
// them. Errors in a script are logged with its name and traceback; they stop the run only with
// fail_on_error. ParaView's headers are seen by catalyst_adaptor.cpp alone; a build without
// Catalyst has an adaptor that refuses to be made (available() says which).
#pragma once

#include <mpi.h>

#include <filesystem>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/visual_data.hpp"

namespace apron::io {

struct CatalystSettings {
  std::vector<std::string> scripts;  // empty: the built-in writer pipeline
  bool fail_on_error = false;
  std::filesystem::path output_dir;  // relative extract paths and the built-in files go here
};

// A failure of a Catalyst script under fail_on_error. Thrown on every rank together (the
// verdict is agreed collectively), so the run can end without MPI_Abort.
class CatalystError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CatalystAdaptor {
 public:
  static bool available();  // built with ParaView Catalyst

  // Collective. Starts ParaView's in-situ runtime on comm and loads the scripts; a script that
  // does not load is logged and dropped (CatalystError under fail_on_error).
  CatalystAdaptor(MPI_Comm comm, CatalystSettings settings);
  // Finalizes the pipelines and the processor. Must run before MPI_Finalize.
  ~CatalystAdaptor();
  CatalystAdaptor(const CatalystAdaptor&) = delete;
  CatalystAdaptor& operator=(const CatalystAdaptor&) = delete;

  // Collective. Hands this step's blocks to every pipeline that wants them at this step (a
  // script's own triggers, "every N steps", may further thin out what it does).
  void execute(long step, double time, std::span<const VisualBlock> blocks);

  // Script failures logged so far (each failing call counts once).
  long errors() const { return errors_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  long errors_ = 0;
};

}  // namespace apron::io
