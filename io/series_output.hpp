// Visual output series (ARCHITECTURE.md, "I/O"): one parallel-HDF5 file per output step, written
// collectively by every rank for its part, and one XDMF time series beside them that ParaView and
// VisIt open directly. A step holds one of:
//   - a point set: XDMF Polyvertex, "position" (3 components) the geometry;
//   - a triangle mesh: each rank's vertices and triangles, the triangles' local vertex indices
//     shifted by the rank's offset into the global vertex numbering; XDMF Triangle;
//   - image bricks: uniform-grid blocks with their own origin, spacing and size; every field of
//     every brick concatenated in one dataset, and each brick an XDMF 3DCoRectMesh grid (a
//     hyperslab of those datasets) of a spatial collection.
// Every HostField other than the geometry becomes an XDMF attribute (Scalar for 1 component,
// Vector for 3, Tensor6, Tensor, else Matrix).
#pragma once

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "io/hdf5_file.hpp"

namespace apron::io {

// This rank's points: n_local rows of every field; one field is "position" with 3 components.
struct PointSetPart {
  std::size_t n_local = 0;
  std::span<const HostField> fields;
};

// This rank's part of a triangle mesh.
struct TriangleMeshPart {
  std::size_t vertices = 0;                  // this rank's
  std::span<const HostField> vertex_fields;  // "position" (3 components) and per-vertex values
  std::size_t triangles = 0;                 // this rank's
  // triangles * 3 indices into this rank's vertices (0 .. vertices - 1).
  const std::uint32_t* connectivity = nullptr;
  std::span<const HostField> triangle_fields;  // per-triangle values
};

// One uniform-grid block: dims values per axis (x fastest in the field arrays), at origin +
// i * spacing (point data), or cells of that size whose first corner is origin (cell data).
struct ImageBrick {
  std::array<double, 3> origin{};
  std::array<double, 3> spacing{1, 1, 1};
  std::array<std::int64_t, 3> dims{1, 1, 1};
};

// This rank's bricks. Every field holds the values of the bricks one after the other, in the
// order of `bricks`, each brick x fastest (sum of dims products rows).
struct BrickSetPart {
  std::span<const ImageBrick> bricks;
  std::span<const HostField> fields;
  bool cell_data = false;  // dims count cells (values at cell centres), not points
};

class SeriesWriter {
 public:
  // Files go to dir/<basename>_<step>.h5 and dir/<basename>.xmf. Collective over comm.
  SeriesWriter(MPI_Comm comm, std::filesystem::path dir, std::string basename);

  // Collective. Each writes this step's HDF5 file (to a .tmp name, renamed when complete) and
  // rewrites the XDMF series listing every step written so far (also via .tmp + rename). A step
  // written again replaces its entry. Arguments that differ between ranks (step, time, field
  // names and types) or are malformed throw std::invalid_argument / logic_error on every rank.
  void write(long step, double time, const PointSetPart& points);
  void write(long step, double time, const TriangleMeshPart& mesh);
  void write(long step, double time, const BrickSetPart& bricks);

  // Collective. On restart from a checkpoint at `step` and `time`: lists the step files already
  // in the folder up to that step (reading only their metadata), so the series index keeps the
  // whole run; later files belong to the abandoned continuation and are left out of it. The
  // index itself is rewritten by the restart's first write, not here: a restart that fails
  // before it leaves the earlier run's index as it was. Throws
  // std::runtime_error, before writing anything, when a file's step and time disagree with the
  // checkpoint's (a file of an earlier step at a later time, or the reverse).
  void resume(long step, double time);

  // The steps of this series whose files are in the folder (rank 0 reads the folder; every rank
  // gets the answer). Collective.
  std::vector<long> steps_on_disk() const;

  const std::filesystem::path& series_path() const { return xmf_path_; }

 private:
  struct Entry {
    long step;
    double time;
    std::string grid;  // this step's XDMF grid
  };
  void add(Entry entry);
  MPI_Comm comm_;
  std::filesystem::path dir_;
  std::string basename_;
  std::filesystem::path xmf_path_;
  std::vector<Entry> entries_;
};

}  // namespace apron::io
