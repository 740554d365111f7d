// Writing a checkpoint: the layout on rank 0, then every rank's rows on a thread of its own.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "io/atomic_file.hpp"
#include "io/checkpoint.hpp"
#include "io/checkpoint_format.hpp"
#include "kernels/common/element_hash.hpp"

namespace apron::io {
namespace fs = std::filesystem;
using namespace checkpoint_format;

// ---- writing ---------------------------------------------------------------------------------

CheckpointWriter::CheckpointWriter(MPI_Comm comm) : comm_(comm) {}

std::uint64_t CheckpointWriter::table(const std::string& name, std::size_t local_rows) {
  check_name("table", name);
  for (const Table& t : tables_)
    if (t.name == name)
      throw std::invalid_argument("checkpoint: table '" + name + "' declared twice");
  Table t{name, slab_of(comm_, local_rows), std::vector<std::int64_t>(size_of(comm_))};
  const auto mine = static_cast<std::int64_t>(local_rows);
  MPI_Allgather(&mine, 1, MPI_INT64_T, t.rank_rows.data(), 1, MPI_INT64_T, comm_);
  tables_.push_back(std::move(t));
  return tables_.back().slab.offset;
}

const CheckpointWriter::Table& CheckpointWriter::find(const std::string& table) const {
  for (const Table& t : tables_)
    if (t.name == table) return t;
  throw std::invalid_argument("checkpoint: no table '" + table + "' declared");
}

std::uint64_t CheckpointWriter::first_row(const std::string& table) const {
  return find(table).slab.offset;
}

void CheckpointWriter::column(const std::string& table, const HostField& field,
                              std::uint64_t partial_checksum) {
  check_name("column", field.name);
  const Table& t = find(table);
  const auto index = static_cast<std::size_t>(&t - tables_.data());
  for (const Array& a : arrays_)
    if (a.table == index && a.field.name == field.name)
      throw std::invalid_argument("checkpoint: column '" + field.name + "' of table '" + table +
                                  "' given twice");
  arrays_.push_back({field, index, t.slab, sum_over_ranks(comm_, partial_checksum)});
}

void CheckpointWriter::replicated(const HostField& field, std::size_t rows) {
  check_name("array", field.name);
  const Slab slab{0, rows, rows};
  const std::uint64_t checksum =
      rows_checksum(field.data, row_bytes(field.type, field.components), rows, 0);
  arrays_.push_back({field, std::string::npos, slab, checksum});
}

// Rank 0: the whole file but the tables' rows, which get contiguous storage whose offsets are
// returned (0 for replicated arrays). HDF5 is done with the file when this returns.
std::vector<std::uint64_t> CheckpointWriter::create_layout(const fs::path& tmp,
                                                           const CheckpointHeader& header) const {
  Manifest m;
  m.header = header;
  for (const Table& t : tables_) m.tables[t.name] = {t.slab.global, t.rank_rows, {}};
  for (const Array& a : arrays_) {
    const ColumnEntry c{a.field.type, a.field.components, a.slab.global, a.checksum};
    if (a.table == std::string::npos)
      m.arrays[a.field.name] = c;
    else
      m.tables[tables_[a.table].name].columns[a.field.name] = c;
  }
  std::vector<std::uint64_t> offsets(arrays_.size(), 0);
  make_output_directory(tmp.parent_path());
  Hdf5File file = Hdf5File::create(MPI_COMM_SELF, tmp);
  write_header(file, header, digest_of(m));
  file.group(kArraysGroup);
  file.group(kTablesGroup);
  for (const Table& t : tables_) {
    file.group(table_path(t.name));
    file.group(columns_path(t.name));
    file.attribute("rows", std::uint64_t{t.slab.global}, table_path(t.name));
    file.dataset({rank_rows_path(t.name), Dtype::i64, 1, t.rank_rows.data()},
                 Slab{0, t.rank_rows.size(), t.rank_rows.size()});
  }
  for (std::size_t i = 0; i < arrays_.size(); ++i) {
    const Array& a = arrays_[i];
    HostField named = a.field;
    if (a.table != std::string::npos) {
      named.name = column_path(tables_[a.table].name, a.field.name);
      offsets[i] = file.reserve(named.name, named.type, named.components, a.slab.global);
    } else {
      named.name = array_path(a.field.name);
      file.dataset(named, a.slab);
    }
    file.attribute("checksum", a.checksum, named.name);
  }
  file.close();
  return offsets;
}

struct PendingCheckpoint::Writing {
  struct Piece {
    std::uint64_t offset;
    const void* data;
    std::size_t bytes;
  };
  fs::path file;
  std::vector<Piece> pieces;
  std::vector<std::shared_ptr<const void>> owners;
  std::uint64_t bytes = 0;  // all ranks
  std::thread thread;
  std::atomic<bool> done{false};
  std::string error;
  double seconds = 0;

  ~Writing() {
    if (thread.joinable()) thread.join();
  }
  // The thread's work. No MPI here: the library may not be initialised for threads.
  void write() {
    const auto start = std::chrono::steady_clock::now();
    error = capture([&] { write_pieces(); });
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    done.store(true, std::memory_order_release);
  }

  // The rows bypass the page cache (O_DIRECT, through an aligned bounce buffer): a buffered
  // write first has to find page-cache pages for the whole checkpoint, which on a virtual
  // machine whose free memory went back to the host ran at 0.4 GB/s against 3-4 GB/s direct
  // (bench/NOTES.md). The unaligned head and tail of each piece (< 4 KiB) go through the page
  // cache. Where O_DIRECT is refused, at the open (tmpfs) or at the first write (some stacked
  // or network file systems), everything goes through the page cache.
  void write_pieces() const {
    Output out(file);
    int failure = 0;
    for (const Piece& p : pieces)
      if (failure == 0) failure = out.write(p);
    for (const int fd : {out.buffered, out.direct})
      if (failure == 0 && fd >= 0 && ::fdatasync(fd) != 0) failure = errno;
    if (failure != 0)
      throw std::runtime_error(file.string() + ": writing the checkpoint failed (" +
                               std::strerror(failure) + ")" +
                               (failure == ENOSPC ? ": the disk is full" : ""));
  }

  // The checkpoint file opened twice (buffered and, if allowed, O_DIRECT), with the bounce buffer.
  struct Output {
    static constexpr std::size_t kBlock = 4096;       // O_DIRECT alignment (offsets, sizes)
    static constexpr std::size_t kBounce = 16 << 20;  // bytes per direct write

    int buffered = -1, direct = -1;
    std::unique_ptr<char, decltype(&std::free)> bounce{nullptr, &std::free};

    explicit Output(const fs::path& file) : buffered(::open(file.c_str(), O_WRONLY)) {
      if (buffered < 0)
        throw std::runtime_error(file.string() + ": cannot open: " + std::strerror(errno));
      bounce.reset(static_cast<char*>(std::aligned_alloc(kBlock, kBounce)));
      if (bounce) direct = ::open(file.c_str(), O_WRONLY | O_DIRECT);
    }
    ~Output() {
      for (const int fd : {buffered, direct})
        if (fd >= 0) ::close(fd);
    }
    Output(const Output&) = delete;
    Output& operator=(const Output&) = delete;

    // Head up to the first block boundary and tail after the last one buffered, the blocks in
    // between direct. Returns 0 or an errno.
    int write(const Piece& p) {
      const auto* data = static_cast<const char*>(p.data);
      const std::uint64_t end = p.offset + p.bytes;
      const std::uint64_t first_block = std::min(end, (p.offset + kBlock - 1) / kBlock * kBlock);
      const std::uint64_t last_block = std::max(first_block, end / kBlock * kBlock);
      if (int status = write_all(buffered, data, first_block - p.offset, p.offset)) return status;
      const char* blocks = data + (first_block - p.offset);
      if (int status = write_blocks(blocks, last_block - first_block, first_block)) return status;
      return write_all(buffered, data + (last_block - p.offset), end - last_block, last_block);
    }

    // (Names unlike Writing's fields: clang's -Wshadow counts them as shadowed here.)
    int write_blocks(const char* data, std::size_t count, std::uint64_t offset) {
      for (std::size_t written = 0; direct >= 0 && written < count;) {
        const std::size_t n = std::min(kBounce, count - written);
        std::memcpy(bounce.get(), data + written, n);
        const int status = write_all(direct, bounce.get(), n, offset + written);
        if (status == EINVAL || status == EOPNOTSUPP) {  // opened, but direct writes refused
          ::close(direct);
          direct = -1;
          return write_all(buffered, data + written, count - written, offset + written);
        }
        if (status != 0) return status;
        written += n;
      }
      return direct >= 0 ? 0 : write_all(buffered, data, count, offset);
    }

    // Returns 0 or an errno (EIO for a write that makes no progress).
    static int write_all(int fd, const char* at, std::size_t left, std::uint64_t at_offset) {
      auto offset = static_cast<off_t>(at_offset);
      while (left > 0) {
        const ssize_t n = ::pwrite(fd, at, left, offset);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? errno : EIO;
        at += n;
        offset += n;
        left -= static_cast<std::size_t>(n);
      }
      return 0;
    }
  };
};

PendingCheckpoint CheckpointWriter::start(const fs::path& path, const CheckpointHeader& header) && {
  // Every rank must have declared the same tables and columns, in the same order (rank 0 lays
  // out the file for all): compare a digest of the declarations.
  Digest declared;
  for (const Table& t : tables_) declared.text(t.name);
  for (const Array& a : arrays_)
    declared.text(a.field.name).text(dtype_name(a.field.type)).i64(a.field.components).u64(a.table);
  std::uint64_t range[2] = {declared.value(), ~declared.value()};
  MPI_Allreduce(MPI_IN_PLACE, range, 2, MPI_UINT64_T, MPI_MAX, comm_);
  if (range[0] != ~range[1])
    throw std::logic_error("CheckpointWriter::start: ranks declared different tables or columns");
  const fs::path tmp = temporary_name(path);
  std::vector<std::uint64_t> offsets(arrays_.size(), 0);
  {
    const QuietHdf5Errors quiet;
    on_root(comm_, [&] {
      // A disk already full must be found before HDF5 writes: a failed close leaves libhdf5
      // 1.10 with a file it crashes on at exit.
      std::uint64_t bytes = header.config_text.size();
      for (const Array& a : arrays_)
        bytes += a.slab.global * row_bytes(a.field.type, a.field.components);
      make_output_directory(tmp.parent_path());
      check_free_space(tmp, bytes);
      try {
        offsets = create_layout(tmp, header);
      } catch (...) {
        std::error_code ignored;
        fs::remove(tmp, ignored);  // no .tmp left behind by a checkpoint that failed
        throw;
      }
    });
  }
  MPI_Bcast(offsets.data(), static_cast<int>(offsets.size()), MPI_UINT64_T, 0, comm_);

  auto writing = std::make_unique<PendingCheckpoint::Writing>();
  writing->file = tmp;
  writing->owners = std::move(owners_);
  for (std::size_t i = 0; i < arrays_.size(); ++i) {
    const Array& a = arrays_[i];
    const std::size_t row = row_bytes(a.field.type, a.field.components);
    writing->bytes += a.slab.global * row;
    if (a.table != std::string::npos && a.slab.count > 0)
      writing->pieces.push_back(
          {offsets[i] + a.slab.offset * row, a.field.data, a.slab.count * row});
  }
  writing->thread = std::thread([w = writing.get()] { w->write(); });
  return PendingCheckpoint(comm_, path, std::move(writing));
}

PendingCheckpoint::PendingCheckpoint(MPI_Comm comm, fs::path path, std::unique_ptr<Writing> writing)
    : comm_(comm), path_(std::move(path)), writing_(std::move(writing)) {}
PendingCheckpoint::PendingCheckpoint(PendingCheckpoint&&) noexcept = default;
PendingCheckpoint& PendingCheckpoint::operator=(PendingCheckpoint&&) noexcept = default;

PendingCheckpoint::~PendingCheckpoint() = default;

bool PendingCheckpoint::written_locally() const {
  return writing_->done.load(std::memory_order_acquire);
}

CheckpointWritten PendingCheckpoint::finish() {
  writing_->thread.join();
  double slowest = 0;
  MPI_Allreduce(&writing_->seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm_);
  try {
    agree(comm_, writing_->error);
  } catch (...) {
    std::error_code ignored;
    if (rank_of(comm_) == 0) fs::remove(writing_->file, ignored);
    throw;
  }
  on_root(comm_, [&] { rename_into_place(writing_->file, path_); });
  CheckpointWritten done{path_, writing_->bytes, slowest};
  writing_.reset();
  return done;
}

PendingCheckpoint save_checkpoint(MPI_Comm comm, const fs::path& path,
                                  const CheckpointState& state) {
  CheckpointWriter out(comm);
  for (const StateTable& t : state.tables) {
    const std::uint64_t first = out.table(t.name, t.rows);
    for (const StateColumn& c : t.columns) {
      const std::uint64_t partial =
          c.checksum ? c.checksum(first)
                     : rows_checksum(c.field.data, row_bytes(c.field.type, c.field.components),
                                     t.rows, first);
      out.column(t.name, c.field, partial);
    }
  }
  for (const ReplicatedArray& a : state.replicated) out.replicated(a.field, a.rows);
  for (const auto& owner : state.keep) out.keep(owner);
  return std::move(out).start(path, state.header);
}

}  // namespace apron::io
