// Checkpoints (ARCHITECTURE.md, "I/O"): one HDF5 file per checkpoint, every rank its rows of each
// named table (offsets from MPI_Exscan per table), written under a .tmp name and renamed when
// complete. Rank 0 lays the file out (header, checksums, small arrays, contiguous storage for the
// distributed ones); then each rank writes its rows at their file offsets on a thread while the
// run goes on. Not collective MPI-IO, which would hold the step loop for the whole write: one
// large contiguous slice per rank and array reaches disk speed without it (bench/NOTES.md). The
// file carries the case's YAML text (a dataset), step, time, dt, seed, rank count, build and a
// format version, a checksum per dataset (kernels/common/element_hash.hpp) and a header checksum
// over all of those, which every load verifies. Workload-neutral: a workload names its arrays and
// scalars; io/ knows no physics.
//
// Layout (format 2): root attributes format, format_version, workload, case, step, time, dt,
// ranks, seed, build, header_checksum; /config (uint8, the case text); /state (one attribute per
// scalar); /tables/<table> (attribute rows) with rank_rows (int64, one per writing rank) and
// columns/<column> (attribute checksum); /arrays/<array> (replicated, attribute checksum).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/hdf5_file.hpp"

namespace apron::io {

// Format 2: distributed rows are grouped in named tables (particles, bricks, vertices, ...), each
// with its own row count per rank; the case text is a dataset; a header checksum covers every
// header value, scalar, table count and dataset checksum. Format 1 files (before tables) are
// refused with a message saying so.
inline constexpr std::int64_t kCheckpointFormat = 2;
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

// Collects one checkpoint's tables and arrays, then writes them. Collective throughout: every
// rank declares the same tables and columns in the same order.
class CheckpointWriter {
 public:
  explicit CheckpointWriter(MPI_Comm comm);
  // Declares table `name` with this rank's `local_rows` rows (collective: the offsets come from
  // MPI_Exscan, and every rank's count is stored). Returns the global index of this rank's first
  // row, on which the checksum of its slice depends.
  std::uint64_t table(const std::string& name, std::size_t local_rows);
  std::uint64_t first_row(const std::string& table) const;
  // A column of a declared table: this rank's rows and their partial checksum (over global rows
  // first_row(table) ...; device_checksum or rows_checksum computes it). The rows are read by the
  // background write: they must stay unchanged until it has finished (see keep()).
  void column(const std::string& table, const HostField& field, std::uint64_t partial_checksum);
  // A small array every rank holds the same copy of (written once, by rank 0, before start()
  // returns).
  void replicated(const HostField& field, std::size_t rows);
  // Keeps `owner` (the buffer the distributed rows live in) alive until the write has finished.
  void keep(std::shared_ptr<const void> owner) { owners_.push_back(std::move(owner)); }
  // Creates path.tmp with the header, the checksums, the replicated arrays and room for the
  // tables' columns (rank 0), then starts each rank's background write of its rows (one
  // contiguous piece per column).
  PendingCheckpoint start(const std::filesystem::path& path, const CheckpointHeader& header) &&;

 private:
  struct Table {
    std::string name;
    Slab slab;
    std::vector<std::int64_t> rank_rows;  // every rank's row count
  };
  struct Array {
    HostField field;
    std::size_t table;  // index into tables_, or npos for a replicated array
    Slab slab;
    std::uint64_t checksum;  // global, after the sum over ranks
  };
  const Table& find(const std::string& table) const;
  std::vector<std::uint64_t> create_layout(const std::filesystem::path& tmp,
                                           const CheckpointHeader& header) const;
  MPI_Comm comm_;
  std::vector<Table> tables_;
  std::vector<Array> arrays_;
  std::vector<std::shared_ptr<const void>> owners_;
};

// What the file says about one table.
struct TableInfo {
  std::uint64_t rows = 0;
  std::vector<std::int64_t> rank_rows;  // rows written by each rank, in rank order
  std::vector<DatasetInfo> columns;
};

// Opens and checks a checkpoint; reads verify each dataset's checksum. Collective.
class CheckpointReader {
 public:
  // Refuses (std::runtime_error naming the file and the reason) a missing, non-HDF5, truncated or
  // foreign file, an unknown format version, a checkpoint of another workload, a header that
  // fails its checksum (a damaged step, time, count, scalar, or a dataset removed) or holds a
  // value out of range.
  CheckpointReader(MPI_Comm comm, const std::filesystem::path& path,
                   const std::string& expected_workload);
  const CheckpointHeader& header() const { return header_; }

  std::vector<std::string> tables() const;
  bool has_table(const std::string& table) const { return tables_.count(table) != 0; }
  const TableInfo& table(const std::string& table) const;
  std::uint64_t rows(const std::string& table) const { return this->table(table).rows; }
  // Rows each writing rank held (header().ranks entries).
  const std::vector<std::int64_t>& rank_rows(const std::string& table) const {
    return this->table(table).rank_rows;
  }
  // Reads rows [first, first + count) of a table's column into out and verifies the column's
  // checksum over all ranks' reads together (the ranks must read disjoint parts that cover the
  // table).
  void read(const std::string& table, const std::string& column, Dtype type, std::uint64_t first,
            std::uint64_t count, void* out) const;
  // A replicated array: its rows, and reading it whole on every rank, verifying its checksum.
  std::uint64_t replicated_rows(const std::string& name) const;
  void read_all(const std::string& name, Dtype type, void* out) const;
  const std::filesystem::path& path() const { return path_; }
  MPI_Comm comm() const { return comm_; }

 private:
  MPI_Comm comm_;
  std::filesystem::path path_;
  std::optional<Hdf5File> file_;
  CheckpointHeader header_;
  std::map<std::string, TableInfo> tables_;
  std::map<std::string, DatasetInfo> replicated_;
};

// ---- a workload's state as named tables --------------------------------------------------------
// A workload describes what it saves instead of laying out the file: save_checkpoint() writes it,
// share_of()/read_share() give each rank its rows back. io/ knows no decomposition: on another
// rank count a rank gets an even contiguous share and migrates rows by position itself.

struct StateColumn {
  HostField field;  // this rank's rows (the table's row count), staged in host memory
  // The partial checksum of this rank's rows, given their first global row (e.g. computed on the
  // device). Empty: computed from the host rows.
  std::function<std::uint64_t(std::uint64_t first_row)> checksum;
};

struct StateTable {
  std::string name;
  std::size_t rows = 0;  // this rank's
  std::vector<StateColumn> columns;
};

struct ReplicatedArray {
  HostField field;
  std::size_t rows = 0;
};

struct CheckpointState {
  CheckpointHeader header;
  std::vector<StateTable> tables;
  std::vector<ReplicatedArray> replicated;
  std::vector<std::shared_ptr<const void>> keep;  // buffers the host rows live in
};

// Collective: starts writing `state` to `path` (see CheckpointWriter::start).
PendingCheckpoint save_checkpoint(MPI_Comm comm, const std::filesystem::path& path,
                                  const CheckpointState& state);

// This rank's rows of a table on load.
struct TableShare {
  std::uint64_t first = 0, count = 0;
  // True when the checkpoint was written by as many ranks as read it: the rows are the ones this
  // rank wrote, in its order (bitwise continuation). False: an even contiguous share.
  bool own_rows = false;
};
TableShare share_of(const CheckpointReader& checkpoint, const std::string& table);

// A column to read: out must hold share.count * components values of type.
struct ColumnTarget {
  std::string name;
  Dtype type;
  void* out;
};
// Collective: reads the share's rows of each column, verifying checksums.
void read_share(const CheckpointReader& checkpoint, const std::string& table,
                const TableShare& share, std::span<const ColumnTarget> columns);

// Checkpoint files live in <output dir>/checkpoints/checkpoint_<step>.h5.
std::filesystem::path checkpoint_dir(const std::filesystem::path& output_dir);
std::filesystem::path checkpoint_path(const std::filesystem::path& output_dir, std::int64_t step);
// The complete checkpoint with the highest step (never a .tmp), if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& output_dir);
// Deletes all but the newest `keep` checkpoints (rank 0 only).
void prune_checkpoints(const std::filesystem::path& output_dir, int keep);
// Removes checkpoint_*.h5.tmp files a killed or failed run left in output_dir, and the MPI-IO
// lock files beside them (rank 0 only, at the start of a run, before any checkpoint of this run
// is started). Returns how many.
int remove_stale_checkpoints(const std::filesystem::path& output_dir);

// `apron inspect`: what a checkpoint or particle output file holds, from its metadata alone;
// with verify, also reads every dataset and checks its checksum. Serial. Returns the text and
// whether every check passed. A checkpoint whose header fails its checksum or range checks, or
// a file that looks like neither a checkpoint nor a particle output, fails.
std::pair<std::string, bool> inspect(const std::filesystem::path& path, bool verify);

// inspect() in a child process (fork), for files that may be damaged: libhdf5 1.10 itself
// crashes (SIGSEGV) or asks for absurd memory on some damaged metadata (tests/fuzz/findings).
// Such a file is refused (std::runtime_error naming it and what happened) instead of ending
// this process. Call it before any OpenMP region has run on this process, or with verify false
// (a forked child must not start OpenMP threads: libgomp is not fork-safe). With crashes_only,
// only a crash or an absurd allocation throws; anything else returns {"", true} (the caller's
// own reader then says what is wrong, in its words).
std::pair<std::string, bool> inspect_isolated(const std::filesystem::path& path, bool verify,
                                              bool crashes_only = false);

}  // namespace apron::io
