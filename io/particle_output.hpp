// Visual output of particle fields: one parallel-HDF5 file per output step (collective writes,
// every rank its slice) and one XDMF time series beside them that ParaView and VisIt open directly.
// A point-set series of io/series_output.hpp.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "io/hdf5_file.hpp"
#include "io/series_output.hpp"

namespace apron::io {

// A field named "position" with 3 components is the geometry; every other HostField becomes an
// XDMF attribute (Scalar for 1 component, Vector for 3).

class ParticleSeriesWriter {
 public:
  // Files go to dir/<basename>_<step>.h5 and dir/<basename>.xmf. Collective over comm.
  ParticleSeriesWriter(MPI_Comm comm, std::filesystem::path dir, std::string basename)
      : series_(comm, std::move(dir), std::move(basename)) {}

  // Collective. Writes this step's HDF5 file (to a .tmp name, renamed when complete) and rewrites
  // the XDMF series listing every step written so far (also via .tmp + rename).
  void write(long step, double time, std::size_t n_local, std::span<const HostField> fields) {
    series_.write(step, time, PointSetPart{n_local, fields});
  }

  // Collective. On restart from a checkpoint at `step`: lists the step files already in the
  // folder up to that step (reading only their metadata), so the series index keeps the whole
  // run; later files belong to the abandoned continuation and are left out of it.
  void resume(long step, double time) { series_.resume(step, time); }

  // The steps whose files are in the folder (collective).
  std::vector<long> steps_on_disk() const { return series_.steps_on_disk(); }

  const std::filesystem::path& series_path() const { return series_.series_path(); }

 private:
  SeriesWriter series_;
};

}  // namespace apron::io
