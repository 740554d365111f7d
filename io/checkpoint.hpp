// Checkpoints (ARCHITECTURE.md, "I/O"): one parallel-HDF5 file per checkpoint, every rank its
// slice of each distributed array, written under a .tmp name and renamed when complete. The file
// carries the case's YAML text, step, time, dt, seed, rank count, build and a format version as
// attributes, and a checksum per dataset (kernels/common/element_hash.hpp) that every load
// verifies. Workload-neutral: a workload names its arrays and scalars; io/ knows no physics.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/hdf5_file.hpp"

namespace apron::io {

inline constexpr std::int64_t kCheckpointFormat = 1;
inline constexpr const char* kCheckpointMagic = "apron checkpoint";

struct CheckpointHeader {
  std::string workload;  // which workload wrote it; another refuses to load it
  std::string case_name;
  std::string config_text;  // the case file as run (overrides applied on restart are re-checked)
  std::int64_t step = 0;
  double time = 0;
  double dt = 0;
  std::int64_t ranks = 1;
  std::uint64_t seed = 0;
  std::string build;                      // version, revision, backend
  std::map<std::string, double> scalars;  // workload state that is one number (counters, ...)
};

// What one finished checkpoint cost.
struct CheckpointWritten {
  std::filesystem::path path;
  std::uint64_t bytes = 0;   // all ranks' rows together
  double write_seconds = 0;  // the background write (pwrite and fdatasync), slowest rank
};

// A checkpoint whose rows are still going to disk. The file exists under its .tmp name with its
// header, checksums and layout complete; each rank's thread writes that rank's rows into it and
// flushes them, while the run goes on. finish() makes it a checkpoint.
class PendingCheckpoint {
 public:
  PendingCheckpoint(PendingCheckpoint&&) noexcept;
  PendingCheckpoint& operator=(PendingCheckpoint&&) noexcept;
  ~PendingCheckpoint();  // waits for the thread; a checkpoint never finished stays a .tmp

  // Whether this rank's rows are on disk (local, no MPI: combine it over ranks before acting).
  bool written_locally() const;
  // Collective: waits for every rank's rows, then renames the file into place. When any rank
  // failed to write, every rank throws its message and the .tmp file is removed.
  CheckpointWritten finish();

 private:
  friend class CheckpointWriter;
  struct Writing;
  PendingCheckpoint(MPI_Comm comm, std::filesystem::path path, std::unique_ptr<Writing> writing);
  MPI_Comm comm_;
  std::filesystem::path path_;
  std::unique_ptr<Writing> writing_;
};

// Collects one checkpoint's arrays, then writes them. Collective throughout.
class CheckpointWriter {
 public:
  // n_local: the rows this rank contributes to every distributed array.
  CheckpointWriter(MPI_Comm comm, std::size_t n_local);
  // The global index of this rank's first row: the checksum of a slice depends on it.
  std::uint64_t first_row() const { return slab_.offset; }
  // A distributed array: this rank's n_local rows and their partial checksum (over global rows
  // first_row() ...; device_checksum or rows_checksum computes it). The rows are read by the
  // background write: they must stay unchanged until it has finished (see keep()).
  void distributed(const HostField& field, std::uint64_t partial_checksum);
  // A small array every rank holds the same copy of (written once, by rank 0, before start()
  // returns).
  void replicated(const HostField& field, std::size_t rows);
  // Keeps `owner` (the buffer the distributed rows live in) alive until the write has finished.
  void keep(std::shared_ptr<const void> owner) { owners_.push_back(std::move(owner)); }
  // Creates path.tmp with the header, the checksums, the replicated arrays and room for the
  // distributed ones (rank 0), then starts each rank's background write of its rows.
  PendingCheckpoint start(const std::filesystem::path& path, const CheckpointHeader& header) &&;

 private:
  struct Array {
    HostField field;
    Slab slab;
    std::uint64_t checksum;  // global, after the sum over ranks
    bool distributed;
  };
  std::vector<std::uint64_t> create_layout(const std::filesystem::path& tmp,
                                           const CheckpointHeader& header) const;
  MPI_Comm comm_;
  Slab slab_;
  std::vector<Array> arrays_;
  std::vector<std::shared_ptr<const void>> owners_;
};

// Opens and checks a checkpoint; reads verify each dataset's checksum. Collective.
class CheckpointReader {
 public:
  // Refuses (std::runtime_error naming the file and the reason) a missing, non-HDF5, truncated or
  // foreign file, an unknown format version, or a checkpoint of another workload.
  CheckpointReader(MPI_Comm comm, const std::filesystem::path& path,
                   const std::string& expected_workload);
  const CheckpointHeader& header() const { return header_; }
  std::uint64_t rows(const std::string& name) const;
  // Reads rows [first, first + count) into out and verifies the dataset's checksum over all
  // ranks' reads together (the ranks must read disjoint parts that cover the dataset).
  void read(const std::string& name, Dtype type, std::uint64_t first, std::uint64_t count,
            void* out) const;
  // Reads a replicated array whole on every rank, verifying its checksum.
  void read_all(const std::string& name, Dtype type, void* out) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  MPI_Comm comm_;
  std::filesystem::path path_;
  std::optional<Hdf5File> file_;
  CheckpointHeader header_;
};

// Checkpoint files live in <output dir>/checkpoints/checkpoint_<step>.h5.
std::filesystem::path checkpoint_dir(const std::filesystem::path& output_dir);
std::filesystem::path checkpoint_path(const std::filesystem::path& output_dir, std::int64_t step);
// The complete checkpoint with the highest step (never a .tmp), if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& output_dir);
// Deletes all but the newest `keep` checkpoints (rank 0 only).
void prune_checkpoints(const std::filesystem::path& output_dir, int keep);

// `apron inspect`: what a checkpoint or particle output file holds, from its metadata alone;
// with verify, also reads every dataset and checks its checksum. Serial. Returns the text and
// whether every check passed.
std::pair<std::string, bool> inspect(const std::filesystem::path& path, bool verify);

}  // namespace apron::io
