#include "io/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <thread>

#include "io/atomic_file.hpp"

#include "kernels/common/element_hash.hpp"

namespace apron::io {
namespace fs = std::filesystem;
namespace {

constexpr const char* kStateGroup = "/state";
constexpr const char* kArraysGroup = "/arrays";

std::string array_path(const std::string& name) {
  return std::string(kArraysGroup) + "/" + name;
}

std::size_t row_bytes(Dtype type, int components) {
  return dtype_size(type) * static_cast<std::size_t>(components);
}

std::uint64_t sum_over_ranks(MPI_Comm comm, std::uint64_t mine) {
  std::uint64_t total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_UINT64_T, MPI_SUM, comm);
  return total;
}

std::string hex(std::uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "%016" PRIx64, value);
  return text;
}

// "checkpoint_000000120.h5" -> 120; anything else -> nullopt.
std::optional<std::int64_t> step_of(const fs::path& file) {
  const std::string name = file.filename().string();
  long long step = -1;
  char tail = 0;
  if (std::sscanf(name.c_str(), "checkpoint_%lld.h%c", &step, &tail) != 2 || tail != '5' ||
      file.extension() != ".h5")
    return std::nullopt;
  return step;
}

std::vector<std::pair<std::int64_t, fs::path>> checkpoints_in(const fs::path& output_dir) {
  std::vector<std::pair<std::int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(checkpoint_dir(output_dir), ec))
    if (const auto step = step_of(item.path())) found.emplace_back(*step, item.path());
  std::sort(found.begin(), found.end());
  return found;
}

void write_header(Hdf5File& file, const CheckpointHeader& h) {
  file.attribute("format", std::string(kCheckpointMagic));
  file.attribute("format_version", kCheckpointFormat);
  file.attribute("workload", h.workload);
  file.attribute("case", h.case_name);
  file.attribute("config", h.config_text);
  file.attribute("step", h.step);
  file.attribute("time", h.time);
  file.attribute("dt", h.dt);
  file.attribute("ranks", h.ranks);
  file.attribute("seed", h.seed);
  file.attribute("build", h.build);
  file.group(kStateGroup);
  for (const auto& [name, value] : h.scalars) file.attribute(name, value, kStateGroup);
}

CheckpointHeader read_header(const Hdf5File& file) {
  CheckpointHeader h;
  h.workload = file.text("workload");
  h.case_name = file.text("case");
  h.config_text = file.text("config");
  h.step = file.integer("step");
  h.time = file.real("time");
  h.dt = file.real("dt");
  h.ranks = file.integer("ranks");
  h.seed = file.unsigned_integer("seed");
  h.build = file.text("build");
  for (const auto& name : file.attribute_names(kStateGroup))
    h.scalars[name] = file.real(name, kStateGroup);
  return h;
}

// Refuses what is not an apron checkpoint of a format this build reads.
void check_format(const Hdf5File& file) {
  if (!file.has_attribute("format") || file.text("format") != kCheckpointMagic)
    throw std::runtime_error(file.path() +
                             ": not an apron checkpoint (an HDF5 file without apron's "
                             "'format' attribute; is it a particle output file?)");
  const auto version = file.integer("format_version");
  if (version != kCheckpointFormat)
    throw std::runtime_error(file.path() + ": checkpoint format version " +
                             std::to_string(version) + ", but this build reads version " +
                             std::to_string(kCheckpointFormat));
}

std::runtime_error checksum_mismatch(const std::string& path, const std::string& name,
                                     std::uint64_t stored, std::uint64_t computed) {
  return std::runtime_error(path + ": dataset '" + name + "' fails its checksum (stored " +
                            hex(stored) + ", computed " + hex(computed) +
                            "): the file was altered or damaged after it was written; restart "
                            "from an earlier checkpoint");
}

}  // namespace

// ---- writing ---------------------------------------------------------------------------------

CheckpointWriter::CheckpointWriter(MPI_Comm comm, std::size_t n_local)
    : comm_(comm), slab_(slab_of(comm, n_local)) {}

void CheckpointWriter::distributed(const HostField& field, std::uint64_t partial_checksum) {
  arrays_.push_back({field, slab_, sum_over_ranks(comm_, partial_checksum), true});
}

void CheckpointWriter::replicated(const HostField& field, std::size_t rows) {
  const Slab slab{0, rows, rows};
  const std::uint64_t checksum =
      rows_checksum(field.data, row_bytes(field.type, field.components), rows, 0);
  arrays_.push_back({field, slab, checksum, false});
}

// Rank 0: the whole file but the distributed rows, which get contiguous storage whose offsets
// are returned (0 for replicated arrays). HDF5 is done with the file when this returns.
std::vector<std::uint64_t> CheckpointWriter::create_layout(const fs::path& tmp,
                                                           const CheckpointHeader& header) const {
  std::vector<std::uint64_t> offsets(arrays_.size(), 0);
  make_output_directory(tmp.parent_path());
  Hdf5File file = Hdf5File::create(MPI_COMM_SELF, tmp);
  write_header(file, header);
  file.group(kArraysGroup);
  for (std::size_t i = 0; i < arrays_.size(); ++i) {
    const Array& a = arrays_[i];
    HostField named = a.field;
    named.name = array_path(a.field.name);
    if (a.distributed)
      offsets[i] = file.reserve(named.name, named.type, named.components, a.slab.global);
    else
      file.dataset(named, a.slab);
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
      if (int error = write_all(buffered, data, first_block - p.offset, p.offset)) return error;
      const char* blocks = data + (first_block - p.offset);
      if (int error = write_blocks(blocks, last_block - first_block, first_block)) return error;
      return write_all(buffered, data + (last_block - p.offset), end - last_block, last_block);
    }

    int write_blocks(const char* data, std::size_t bytes, std::uint64_t offset) {
      for (std::size_t done = 0; direct >= 0 && done < bytes;) {
        const std::size_t n = std::min(kBounce, bytes - done);
        std::memcpy(bounce.get(), data + done, n);
        const int error = write_all(direct, bounce.get(), n, offset + done);
        if (error == EINVAL || error == EOPNOTSUPP) {  // opened, but direct writes refused
          ::close(direct);
          direct = -1;
          return write_all(buffered, data + done, bytes - done, offset + done);
        }
        if (error != 0) return error;
        done += n;
      }
      return direct >= 0 ? 0 : write_all(buffered, data, bytes, offset);
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
  const fs::path tmp = temporary_name(path);
  std::vector<std::uint64_t> offsets(arrays_.size(), 0);
  {
    const QuietHdf5Errors quiet;
    on_root(comm_, [&] { offsets = create_layout(tmp, header); });
  }
  MPI_Bcast(offsets.data(), static_cast<int>(offsets.size()), MPI_UINT64_T, 0, comm_);

  auto writing = std::make_unique<PendingCheckpoint::Writing>();
  writing->file = tmp;
  writing->owners = std::move(owners_);
  for (std::size_t i = 0; i < arrays_.size(); ++i) {
    const Array& a = arrays_[i];
    const std::size_t row = row_bytes(a.field.type, a.field.components);
    writing->bytes += a.slab.global * row;
    if (a.distributed && a.slab.count > 0)
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

// ---- reading ---------------------------------------------------------------------------------

CheckpointReader::CheckpointReader(MPI_Comm comm, const fs::path& path,
                                   const std::string& expected_workload)
    : comm_(comm), path_(path) {
  const QuietHdf5Errors quiet;
  agree(comm, capture([&] {
          file_.emplace(Hdf5File::open(comm, path));
          check_format(*file_);
          header_ = read_header(*file_);
        }));
  if (header_.workload != expected_workload)
    throw std::runtime_error(path.string() + ": a checkpoint of the '" + header_.workload +
                             "' workload (case '" + header_.case_name + "'); this case runs the '" +
                             expected_workload + "' workload and cannot continue from it");
}

std::uint64_t CheckpointReader::rows(const std::string& name) const {
  const QuietHdf5Errors quiet;
  std::uint64_t n = 0;
  agree(comm_, capture([&] {
          if (!file_->has_dataset(array_path(name)))
            throw std::runtime_error(path_.string() + ": the checkpoint has no array '" + name +
                                     "' (written by an incompatible version?)");
          n = file_->info(array_path(name)).rows;
        }));
  return n;
}

void CheckpointReader::read(const std::string& name, Dtype type, std::uint64_t first,
                            std::uint64_t count, void* out) const {
  const QuietHdf5Errors quiet;
  const std::string set = array_path(name);
  std::uint64_t stored = 0, mine = 0;
  agree(comm_, capture([&] {
          const DatasetInfo info = file_->info(set);
          if (info.type != type)
            throw std::runtime_error(path_.string() + ": array '" + name + "' holds " +
                                     dtype_name(info.type) + ", expected " + dtype_name(type));
          file_->read(set, type, first, count, out);
          stored = file_->unsigned_integer("checksum", set);
          mine = rows_checksum(out, row_bytes(type, info.components), count, first);
        }));
  const std::uint64_t computed = sum_over_ranks(comm_, mine);
  if (computed != stored) throw checksum_mismatch(path_.string(), name, stored, computed);
}

void CheckpointReader::read_all(const std::string& name, Dtype type, void* out) const {
  const QuietHdf5Errors quiet;
  const std::string set = array_path(name);
  agree(comm_, capture([&] {
          const DatasetInfo info = file_->info(set);
          file_->read(set, type, 0, info.rows, out);
          const std::uint64_t stored = file_->unsigned_integer("checksum", set);
          const std::uint64_t computed =
              rows_checksum(out, row_bytes(type, info.components), info.rows, 0);
          if (computed != stored) throw checksum_mismatch(path_.string(), name, stored, computed);
        }));
}

// ---- files -------------------------------------------------------------------------------------

fs::path checkpoint_dir(const fs::path& output_dir) {
  return output_dir / "checkpoints";
}

fs::path checkpoint_path(const fs::path& output_dir, std::int64_t step) {
  char name[48];
  std::snprintf(name, sizeof name, "checkpoint_%09lld.h5", static_cast<long long>(step));
  return checkpoint_dir(output_dir) / name;
}

std::optional<fs::path> latest_checkpoint(const fs::path& output_dir) {
  const auto found = checkpoints_in(output_dir);
  if (found.empty()) return std::nullopt;
  return found.back().second;
}

void prune_checkpoints(const fs::path& output_dir, int keep) {
  const auto found = checkpoints_in(output_dir);
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < found.size(); ++i) {
    std::error_code ignored;
    fs::remove(found[i].second, ignored);
  }
}

// ---- inspect
// -------------------------------------------------------------------------------------

namespace {

std::string size_text(double bytes) {
  char text[32];
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) bytes /= 1000, ++u;
  std::snprintf(text, sizeof text, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  return text;
}

// Reads a dataset in blocks and returns its checksum.
std::uint64_t checksum_of(const Hdf5File& file, const DatasetInfo& info) {
  const std::size_t bytes = row_bytes(info.type, info.components);
  const std::uint64_t block = std::max<std::uint64_t>(1, (64u << 20) / bytes);
  std::vector<unsigned char> buffer(block * bytes);
  std::uint64_t sum = 0;
  for (std::uint64_t first = 0; first < info.rows; first += block) {
    const std::uint64_t count = std::min<std::uint64_t>(block, info.rows - first);
    file.read(info.name, info.type, first, count, buffer.data());
    sum += rows_checksum(buffer.data(), bytes, count, first);
  }
  return sum;
}

}  // namespace

std::pair<std::string, bool> inspect(const fs::path& path, bool verify) {
  const QuietHdf5Errors quiet;
  std::ostringstream out;
  bool ok = true;
  const Hdf5File file = Hdf5File::open_serial(path);
  const bool is_checkpoint =
      file.has_attribute("format") && file.text("format") == kCheckpointMagic;
  std::vector<std::string> sets;
  if (is_checkpoint) {
    check_format(file);
    const CheckpointHeader h = read_header(file);
    out << path.string() << ": apron checkpoint, format " << kCheckpointFormat << "\n"
        << "  workload " << h.workload << ", case '" << h.case_name << "', step " << h.step
        << ", time " << h.time << " s, dt " << h.dt << " s\n"
        << "  written by " << h.ranks << " rank(s), build " << h.build << ", seed " << h.seed
        << "\n  state:";
    for (const auto& [name, value] : h.scalars) out << " " << name << "=" << value;
    out << "\n  case file: " << h.config_text.size() << " bytes of YAML\n";
    sets = file.datasets(kArraysGroup);
  } else if (file.has_attribute("step") && file.has_attribute("time")) {
    out << path.string() << ": apron particle output, step " << file.integer("step") << ", time "
        << file.real("time") << " s, written by " << file.integer("ranks")
        << " rank(s); no checksums (visual output)\n";
    sets = file.datasets("/");
  } else {
    throw std::runtime_error(path.string() + ": an HDF5 file, but not one apron wrote");
  }
  for (const auto& name : sets) {
    const DatasetInfo info = file.info(name);
    out << "  " << name << "  " << dtype_name(info.type) << " [" << info.rows;
    if (info.components != 1) out << " x " << info.components;
    out << "]  "
        << size_text(static_cast<double>(info.rows * row_bytes(info.type, info.components)));
    if (is_checkpoint) {
      const std::uint64_t stored = file.unsigned_integer("checksum", name);
      out << "  checksum " << hex(stored);
      if (verify) {
        const bool good = checksum_of(file, info) == stored;
        ok = ok && good;
        out << (good ? " (verified)" : " (MISMATCH: altered or damaged)");
      }
    }
    out << "\n";
  }
  return {out.str(), ok};
}

}  // namespace apron::io
