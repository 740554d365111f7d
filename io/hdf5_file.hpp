// Parallel-HDF5 files shared by every apron output (particle series, checkpoints): collective
// creation through the MPI-IO driver, one slab of rows per rank, failures that become the same
// exception on every rank, and the read side that restarts and `apron inspect` use.
#pragma once

#include <hdf5.h>
#include <mpi.h>

#include <climits>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "io/host_field.hpp"

namespace apron::io {

int rank_of(MPI_Comm comm);
int size_of(MPI_Comm comm);

// ---- agreeing on failure ------------------------------------------------------------------

// Runs f and returns the message of the exception it threw, or "" when it succeeded.
template <class F>
std::string capture(F&& f) {
  try {
    f();
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

// A failure every rank of a communicator throws together (from agree()): nothing waits in a
// collective call, so the program can report it once and end without MPI_Abort.
class AgreedError : public std::runtime_error {
 public:
  AgreedError(const std::string& message, bool every_rank)
      : std::runtime_error(message), every_rank_(every_rank) {}
  // Whether the communicator held every rank of MPI_COMM_WORLD (else ranks outside it go on).
  bool every_rank() const { return every_rank_; }

 private:
  bool every_rank_;
};

// Collective. When any rank passes a non-empty error, every rank throws AgreedError with the
// message of the lowest failing rank, so all ranks fail together and report the same thing
// (a rank that did not fail would otherwise wait forever in the next collective call).
void agree(MPI_Comm comm, const std::string& local_error);

// Collective: rank 0 does f (file-system work that must happen once), then all ranks learn how
// it went. This is also a barrier: no rank returns before rank 0 has finished f.
template <class F>
void on_root(MPI_Comm comm, F&& f) {
  agree(comm, rank_of(comm) == 0 ? capture(std::forward<F>(f)) : std::string{});
}

void make_output_directory(const std::filesystem::path& dir);
void rename_into_place(const std::filesystem::path& from, const std::filesystem::path& to);

// ---- HDF5 ------------------------------------------------------------------------------------

// Silences HDF5's automatic error-stack printing while alive: failures become exceptions that
// carry HDF5's own reason, instead of a stack dump on stderr from every rank.
class QuietHdf5Errors {
 public:
  QuietHdf5Errors();
  ~QuietHdf5Errors();
  QuietHdf5Errors(const QuietHdf5Errors&) = delete;
  QuietHdf5Errors& operator=(const QuietHdf5Errors&) = delete;

 private:
  H5E_auto2_t print_ = nullptr;
  void* data_ = nullptr;
};

// The innermost entry of HDF5's error stack: the actual cause (e.g. the errno of an open).
// Must run right after the failed call, before another API call clears the stack.
std::string hdf5_cause();

// Owns one HDF5 identifier and closes it with its H5?close on every way out of a scope.
class Handle {
 public:
  using Close = herr_t (*)(hid_t);
  Handle(hid_t id, Close closer) : id_(id), close_(closer) {}
  Handle(Handle&& other) noexcept
      : id_(std::exchange(other.id_, H5I_INVALID_HID)), close_(other.close_) {}
  Handle& operator=(Handle&& other) noexcept {
    std::swap(id_, other.id_);
    std::swap(close_, other.close_);
    return *this;
  }
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  // Closes now and says whether that worked: closing a file is when HDF5 flushes it.
  bool close() { return close_(std::exchange(id_, H5I_INVALID_HID)) >= 0; }
  // Lets go without closing (see Hdf5File::abandon).
  void release() { id_ = H5I_INVALID_HID; }

 private:
  hid_t id_;
  Close close_;
};

// This rank's rows of a dataset.
struct Slab {
  hsize_t offset;
  hsize_t count;
  hsize_t global;
};

// Collective. Rank r's rows follow those of ranks 0..r-1.
Slab slab_of(MPI_Comm comm, std::size_t n_local);

// What a dataset holds, from its metadata alone.
struct DatasetInfo {
  std::string name;
  Dtype type = Dtype::u8;
  hsize_t rows = 0;
  int components = 1;
};

// A parallel HDF5 file. create()/open() and every member function are collective unless noted:
// all ranks call them in the same order with the same names, types and shapes.
class Hdf5File {
 public:
  static Hdf5File create(MPI_Comm comm, const std::filesystem::path& path);
  // Opens an existing file read-only; a file that is not HDF5 (or is truncated so that its
  // superblock is unreadable) throws with the path and the reason.
  static Hdf5File open(MPI_Comm comm, const std::filesystem::path& path);
  // One rank alone (no MPI-IO), for inspecting files.
  static Hdf5File open_serial(const std::filesystem::path& path);

  void attribute(const std::string& name, double value, const std::string& object = ".");
  void attribute(const std::string& name, std::int64_t value, const std::string& object = ".");
  void attribute(const std::string& name, std::uint64_t value, const std::string& object = ".");
  void attribute(const std::string& name, const std::string& value,
                 const std::string& object = ".");
  void group(const std::string& name);
  // Writes this rank's slab of the global dataset `field.name` (collective).
  void dataset(const HostField& field, const Slab& slab);
  // Creates dataset `name` of `rows` rows with its storage allocated now, in one contiguous
  // extent, and returns that extent's byte offset in the file: its rows can then be written
  // with plain pwrite() by any process, without HDF5 (asynchronous checkpoints).
  std::uint64_t reserve(const std::string& name, Dtype type, int components, hsize_t rows);

  bool has_attribute(const std::string& name, const std::string& object = ".") const;
  double real(const std::string& name, const std::string& object = ".") const;
  std::int64_t integer(const std::string& name, const std::string& object = ".") const;
  std::uint64_t unsigned_integer(const std::string& name, const std::string& object = ".") const;
  std::string text(const std::string& name, const std::string& object = ".") const;
  std::vector<std::string> attribute_names(const std::string& object = ".") const;
  bool has_dataset(const std::string& name) const;
  DatasetInfo info(const std::string& name) const;
  // The datasets under a group ("/" for the root), by name, in the file's order.
  std::vector<std::string> datasets(const std::string& group) const;
  // The groups under a group, by full name, in the file's order.
  std::vector<std::string> groups(const std::string& group) const;
  bool has_group(const std::string& name) const;
  // Reads rows [first, first + count) of a dataset into `out` (count * components values of
  // `type`), independently per rank.
  void read(const std::string& name, Dtype type, hsize_t first, hsize_t count, void* out) const;

  void close();
  // Drops the file without closing it, on every rank, after an agreed write failure: a failed
  // write leaves the ranks' metadata caches in different states, and the collective flush of a
  // close would then wait for ever in mismatched calls. HDF5 keeps the file open until the
  // process ends (the command line ends without MPI_Finalize then).
  void abandon() { file_.release(); }
  const std::string& path() const { return path_; }

 private:
  explicit Hdf5File(std::string path) : path_(std::move(path)) {}
  std::runtime_error failure(const std::string& what) const;
  void check(herr_t status, const std::string& what) const;
  Handle own(hid_t id, Handle::Close closer, const std::string& what) const;
  Handle create_dataset(const std::string& name, Dtype type, int components, hsize_t rows,
                        H5D_alloc_time_t allocation);
  void write_attribute(const std::string& name, const std::string& object, hid_t file_type,
                       hid_t memory_type, const void* value);
  Handle open_attribute(const std::string& name, const std::string& object) const;

  std::string path_;
  MPI_Comm comm_ = MPI_COMM_NULL;  // the ranks that opened it (none for open_serial)
  Handle transfer_{H5I_INVALID_HID, H5Pclose};
  Handle file_{H5I_INVALID_HID, H5Fclose};
};

// Rank 0 alone: throws when the file system holding `path` has less than `bytes` (plus room for
// HDF5's metadata) free, naming the folder, the free and the needed space.
void check_free_space(const std::filesystem::path& path, std::uint64_t bytes);

// Collective. Writes a complete file at temporary_name(path) through `contents(file)`, then
// renames it to `path`. On failure every rank throws and the partial file is removed.
// `local_bytes` (this rank's rows) is checked against the free space first: parallel HDF5 1.10
// does not survive a write that fails on one rank (the ranks then wait in different collective
// calls at the close), so a disk that is already full must be found before HDF5 writes.
void write_atomically(MPI_Comm comm, const std::filesystem::path& path,
                      const std::function<void(Hdf5File&)>& contents,
                      std::uint64_t local_bytes = 0);

}  // namespace apron::io
