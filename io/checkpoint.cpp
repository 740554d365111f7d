#include "io/checkpoint.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
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
constexpr const char* kTablesGroup = "/tables";
constexpr const char* kConfigSet = "/config";

std::string array_path(const std::string& name) {
  return std::string(kArraysGroup) + "/" + name;
}
std::string table_path(const std::string& table) {
  return std::string(kTablesGroup) + "/" + table;
}
std::string rank_rows_path(const std::string& table) {
  return table_path(table) + "/rank_rows";
}
std::string columns_path(const std::string& table) {
  return table_path(table) + "/columns";
}
std::string column_path(const std::string& table, const std::string& column) {
  return columns_path(table) + "/" + column;
}
std::string leaf(const std::string& full) {
  return full.substr(full.rfind('/') + 1);
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

std::string number(double value) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

void check_name(const std::string& what, const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
    throw std::invalid_argument("checkpoint: " + what + " '" + name + "' cannot be a name");
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

// ---- the manifest: everything but the rows, and its checksum ----------------------------------

struct ColumnEntry {
  Dtype type = Dtype::u8;
  int components = 1;
  std::uint64_t rows = 0;
  std::uint64_t checksum = 0;
};
struct TableEntry {
  std::uint64_t rows = 0;
  std::vector<std::int64_t> rank_rows;
  std::map<std::string, ColumnEntry> columns;
};
struct Manifest {
  CheckpointHeader header;
  std::map<std::string, TableEntry> tables;
  std::map<std::string, ColumnEntry> arrays;  // replicated
};

// FNV-1a over a length-prefixed serialisation: any change of a value, a name, a count or the set
// of datasets changes it (tests/checkpoint/ckpt_digest.py is the same in Python).
class Digest {
 public:
  Digest& bytes(const void* data, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      h_ ^= static_cast<const unsigned char*>(data)[i];
      h_ *= 1099511628211ull;
    }
    return *this;
  }
  Digest& u64(std::uint64_t v) {
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(v >> (8 * i));
    return bytes(le, 8);
  }
  Digest& i64(std::int64_t v) { return u64(static_cast<std::uint64_t>(v)); }
  Digest& f64(double v) { return u64(std::bit_cast<std::uint64_t>(v)); }
  Digest& text(const std::string& s) { return u64(s.size()).bytes(s.data(), s.size()); }
  Digest& column(const std::string& name, const ColumnEntry& c) {
    return text(name).text(dtype_name(c.type)).i64(c.components).u64(c.rows).u64(c.checksum);
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 14695981039346656037ull;
};

std::uint64_t digest_of(const Manifest& m) {
  const CheckpointHeader& h = m.header;
  Digest d;
  d.text(kCheckpointMagic).i64(kCheckpointFormat);
  d.text(h.workload).text(h.case_name).text(h.config_text);
  d.i64(h.step).f64(h.time).f64(h.dt).i64(h.ranks).u64(h.seed).text(h.build);
  d.u64(h.scalars.size());
  for (const auto& [name, value] : h.scalars) d.text(name).f64(value);
  d.u64(m.tables.size());
  for (const auto& [name, t] : m.tables) {
    d.text(name).u64(t.rows).u64(t.rank_rows.size());
    for (const auto r : t.rank_rows) d.i64(r);
    d.u64(t.columns.size());
    for (const auto& [column, c] : t.columns) d.column(column, c);
  }
  d.u64(m.arrays.size());
  for (const auto& [name, c] : m.arrays) d.column(name, c);
  return d.value();
}

std::runtime_error bad_value(const std::string& path, const std::string& what,
                             const std::string& value, const std::string& rule) {
  return std::runtime_error(path + ": " + what + " is " + value + ", " + rule +
                            ": the checkpoint was altered or damaged after it was written; "
                            "restart from an earlier checkpoint");
}

// Values a checkpoint can never hold, whatever its checksum says.
void check_ranges(const std::string& path, const Manifest& m) {
  const CheckpointHeader& h = m.header;
  if (h.step < 0) throw bad_value(path, "the step", std::to_string(h.step), "must be >= 0");
  if (!std::isfinite(h.time) || h.time < 0)
    throw bad_value(path, "the time", number(h.time), "must be finite and >= 0");
  if (!std::isfinite(h.dt) || h.dt < 0 || (h.dt == 0 && h.step > 0))
    throw bad_value(path, "dt", number(h.dt), "must be finite and > 0 (0 only at step 0)");
  if (h.ranks < 1 || h.ranks > (1 << 24))
    throw bad_value(path, "the rank count", std::to_string(h.ranks), "must be >= 1");
  for (const auto& [name, t] : m.tables) {
    const std::string what = "table '" + name + "'";
    if (static_cast<std::int64_t>(t.rank_rows.size()) != h.ranks)
      throw bad_value(path, "the per-rank row counts of " + what,
                      std::to_string(t.rank_rows.size()) + " entries",
                      "must be one per writing rank (" + std::to_string(h.ranks) + ")");
    std::uint64_t sum = 0;
    for (std::size_t r = 0; r < t.rank_rows.size(); ++r) {
      if (t.rank_rows[r] < 0)
        throw bad_value(path, "the row count of rank " + std::to_string(r) + " in " + what,
                        std::to_string(t.rank_rows[r]), "must be >= 0");
      // Each at most the table's rows, so that their sum cannot wrap around to the right total.
      if (static_cast<std::uint64_t>(t.rank_rows[r]) > t.rows)
        throw bad_value(path, "the row count of rank " + std::to_string(r) + " in " + what,
                        std::to_string(t.rank_rows[r]),
                        "must be at most the table's " + std::to_string(t.rows) + " rows");
      sum += static_cast<std::uint64_t>(t.rank_rows[r]);
    }
    if (sum != t.rows)
      throw bad_value(path, "the per-rank row counts of " + what, "a sum of " + std::to_string(sum),
                      "must be its " + std::to_string(t.rows) + " rows");
    for (const auto& [column, c] : t.columns)
      if (c.rows != t.rows)
        throw bad_value(path, "column '" + column + "' of " + what,
                        std::to_string(c.rows) + " rows long",
                        "must be the table's " + std::to_string(t.rows) + " rows");
  }
}

void write_header(Hdf5File& file, const CheckpointHeader& h, std::uint64_t digest) {
  file.attribute("format", std::string(kCheckpointMagic));
  file.attribute("format_version", kCheckpointFormat);
  file.attribute("workload", h.workload);
  file.attribute("case", h.case_name);
  file.attribute("step", h.step);
  file.attribute("time", h.time);
  file.attribute("dt", h.dt);
  file.attribute("ranks", h.ranks);
  file.attribute("seed", h.seed);
  file.attribute("build", h.build);
  file.attribute("header_checksum", digest);
  // The case text is a dataset: an attribute over 64 KiB does not fit an object header.
  file.dataset({kConfigSet, Dtype::u8, 1, h.config_text.data()},
               Slab{0, h.config_text.size(), h.config_text.size()});
  file.group(kStateGroup);
  for (const auto& [name, value] : h.scalars) file.attribute(name, value, kStateGroup);
}

// Refuses what is not an apron checkpoint of a format this build reads.
void check_format(const Hdf5File& file) {
  if (!file.has_attribute("format") || file.text("format") != kCheckpointMagic)
    throw std::runtime_error(file.path() +
                             ": not an apron checkpoint (an HDF5 file without apron's "
                             "'format' attribute; is it a particle output file?)");
  const auto version = file.integer("format_version");
  if (version == 1)
    throw std::runtime_error(file.path() +
                             ": checkpoint format version 1 (written before checkpoints held "
                             "named tables); this build reads version " +
                             std::to_string(kCheckpointFormat) +
                             " only: continue that run with the build that wrote it");
  if (version != kCheckpointFormat)
    throw std::runtime_error(file.path() + ": checkpoint format version " +
                             std::to_string(version) + ", but this build reads version " +
                             std::to_string(kCheckpointFormat));
}

std::string what_is_missing(const Hdf5File& file, const std::string& name) {
  return file.path() + ": the checkpoint has no " + name +
         " (a dataset or group was removed, or the file is damaged)";
}

ColumnEntry column_entry(const Hdf5File& file, const std::string& set) {
  if (!file.has_dataset(set))
    throw std::runtime_error(what_is_missing(file, "dataset '" + set + "'"));
  const DatasetInfo info = file.info(set);
  if (!file.has_attribute("checksum", set))
    throw std::runtime_error(file.path() + ": dataset '" + set + "' has no checksum attribute");
  return {info.type, info.components, info.rows, file.unsigned_integer("checksum", set)};
}

// Reads everything but the rows (any number of ranks, independently), then checks the values'
// ranges and the header checksum.
Manifest read_manifest(const Hdf5File& file) {
  check_format(file);
  Manifest m;
  CheckpointHeader& h = m.header;
  for (const char* name :
       {"workload", "case", "step", "time", "dt", "ranks", "seed", "build", "header_checksum"})
    if (!file.has_attribute(name))
      throw std::runtime_error(what_is_missing(file, std::string("attribute '") + name + "'"));
  h.workload = file.text("workload");
  h.case_name = file.text("case");
  h.step = file.integer("step");
  h.time = file.real("time");
  h.dt = file.real("dt");
  h.ranks = file.integer("ranks");
  h.seed = file.unsigned_integer("seed");
  h.build = file.text("build");
  if (!file.has_dataset(kConfigSet))
    throw std::runtime_error(what_is_missing(file, "dataset '/config' (the case text)"));
  const DatasetInfo config = file.info(kConfigSet);
  if (config.type != Dtype::u8 || config.components != 1)
    throw std::runtime_error(file.path() + ": dataset '/config' is not text");
  h.config_text.resize(config.rows);
  file.read(kConfigSet, Dtype::u8, 0, config.rows, h.config_text.data());
  if (!file.has_group(kStateGroup))
    throw std::runtime_error(what_is_missing(file, "group '/state'"));
  for (const auto& name : file.attribute_names(kStateGroup))
    h.scalars[name] = file.real(name, kStateGroup);
  if (file.has_group(kTablesGroup))
    for (const auto& group : file.groups(kTablesGroup)) {
      const std::string name = leaf(group);
      TableEntry& t = m.tables[name];
      if (!file.has_attribute("rows", group))
        throw std::runtime_error(what_is_missing(file, "row count of table '" + name + "'"));
      t.rows = file.unsigned_integer("rows", group);
      if (!file.has_dataset(rank_rows_path(name)))
        throw std::runtime_error(
            what_is_missing(file, "per-rank row counts of table '" + name + "'"));
      const DatasetInfo counts = file.info(rank_rows_path(name));
      if (counts.type != Dtype::i64 || counts.components != 1 || counts.rows > (1u << 24))
        throw std::runtime_error(file.path() + ": table '" + name +
                                 "': its per-rank row counts are damaged");
      t.rank_rows.resize(counts.rows);
      file.read(rank_rows_path(name), Dtype::i64, 0, counts.rows, t.rank_rows.data());
      if (!file.has_group(columns_path(name)))
        throw std::runtime_error(what_is_missing(file, "columns of table '" + name + "'"));
      for (const auto& set : file.datasets(columns_path(name)))
        t.columns[leaf(set)] = column_entry(file, set);
    }
  if (file.has_group(kArraysGroup))
    for (const auto& set : file.datasets(kArraysGroup))
      m.arrays[leaf(set)] = column_entry(file, set);
  return m;
}

// The checks of a manifest read from `path`; "" when it passes, else the reason.
std::string manifest_problem(const Hdf5File& file, const Manifest& m) {
  return capture([&] {
    check_ranges(file.path(), m);
    const std::uint64_t stored = file.unsigned_integer("header_checksum");
    const std::uint64_t computed = digest_of(m);
    if (stored != computed)
      throw std::runtime_error(
          file.path() + ": the checkpoint header fails its checksum (stored " + hex(stored) +
          ", computed " + hex(computed) + "): a header value (step " +
          std::to_string(m.header.step) + ", time " + number(m.header.time) + ", dt, ranks " +
          std::to_string(m.header.ranks) +
          ", a /state scalar, a table's row counts, the case text) or the list of datasets "
          "was altered or damaged after it was written; restart from an earlier checkpoint");
  });
}

std::runtime_error checksum_mismatch(const std::string& path, const std::string& name,
                                     std::uint64_t stored, std::uint64_t computed) {
  return std::runtime_error(path + ": dataset '" + name + "' fails its checksum (stored " +
                            hex(stored) + ", computed " + hex(computed) +
                            "): the file was altered or damaged after it was written; restart "
                            "from an earlier checkpoint");
}

// Replicated arrays hold a run's small shared state (the partition's boxes), which is finite: a
// NaN or an infinity there passed its checksum only by being resealed, and would send the ranks
// different ways. "" when values [first, first + count) of `data` are finite, else the reason.
std::string non_finite_problem(const std::string& path, const std::string& name, Dtype type,
                               const void* data, std::uint64_t count, std::uint64_t first = 0) {
  for (std::uint64_t i = 0; i < count; ++i) {
    const double v = type == Dtype::f64   ? static_cast<const double*>(data)[i]
                     : type == Dtype::f32 ? static_cast<const float*>(data)[i]
                                          : 0.0;
    if (!std::isfinite(v))
      return bad_value(path, "value " + std::to_string(first + i) + " of array '" + name + "'",
                       number(v), "must be finite")
          .what();
  }
  return "";
}

}  // namespace

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

// ---- reading ---------------------------------------------------------------------------------

CheckpointReader::CheckpointReader(MPI_Comm comm, const fs::path& path,
                                   const std::string& expected_workload)
    : comm_(comm), path_(path) {
  const QuietHdf5Errors quiet;
  agree(comm, capture([&] {
          file_.emplace(Hdf5File::open(comm, path));
          const Manifest m = read_manifest(*file_);
          if (const std::string problem = manifest_problem(*file_, m); !problem.empty())
            throw std::runtime_error(problem);
          header_ = m.header;
          for (const auto& [name, t] : m.tables) {
            TableInfo& info = tables_[name];
            info.rows = t.rows;
            info.rank_rows = t.rank_rows;
            for (const auto& [column, c] : t.columns)
              info.columns.push_back({column, c.type, c.rows, c.components});
          }
          for (const auto& [name, c] : m.arrays)
            replicated_[name] = {array_path(name), c.type, c.rows, c.components};
        }));
  if (header_.workload != expected_workload)
    throw std::runtime_error(path.string() + ": a checkpoint of the '" + header_.workload +
                             "' workload (case '" + header_.case_name + "'); this case runs the '" +
                             expected_workload + "' workload and cannot continue from it");
}

std::vector<std::string> CheckpointReader::tables() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : tables_) names.push_back(name);
  return names;
}

const TableInfo& CheckpointReader::table(const std::string& table) const {
  const auto found = tables_.find(table);
  if (found == tables_.end())
    throw std::runtime_error(path_.string() + ": the checkpoint has no table '" + table +
                             "' (written by an incompatible version?)");
  return found->second;
}

void CheckpointReader::read(const std::string& table, const std::string& column, Dtype type,
                            std::uint64_t first, std::uint64_t count, void* out) const {
  const QuietHdf5Errors quiet;
  const std::string set = column_path(table, column);
  std::uint64_t stored = 0, mine = 0;
  agree(comm_, capture([&] {
          const TableInfo& t = this->table(table);
          const auto c = std::find_if(t.columns.begin(), t.columns.end(),
                                      [&](const DatasetInfo& d) { return d.name == column; });
          if (c == t.columns.end())
            throw std::runtime_error(path_.string() + ": table '" + table + "' has no column '" +
                                     column + "' (written by an incompatible version?)");
          if (c->type != type)
            throw std::runtime_error(path_.string() + ": column '" + column + "' of table '" +
                                     table + "' holds " + dtype_name(c->type) + ", expected " +
                                     dtype_name(type));
          file_->read(set, type, first, count, out);
          stored = file_->unsigned_integer("checksum", set);
          mine = rows_checksum(out, row_bytes(type, c->components), count, first);
        }));
  const std::uint64_t computed = sum_over_ranks(comm_, mine);
  if (computed != stored) throw checksum_mismatch(path_.string(), column, stored, computed);
}

std::uint64_t CheckpointReader::replicated_rows(const std::string& name) const {
  const auto found = replicated_.find(name);
  if (found == replicated_.end())
    throw std::runtime_error(path_.string() + ": the checkpoint has no array '" + name +
                             "' (written by an incompatible version?)");
  return found->second.rows;
}

void CheckpointReader::read_all(const std::string& name, Dtype type, void* out) const {
  const QuietHdf5Errors quiet;
  const std::string set = array_path(name);
  agree(comm_, capture([&] {
          const DatasetInfo info = file_->info(set);
          if (info.type != type)
            throw std::runtime_error(path_.string() + ": array '" + name + "' holds " +
                                     dtype_name(info.type) + ", expected " + dtype_name(type));
          file_->read(set, type, 0, info.rows, out);
          const std::uint64_t stored = file_->unsigned_integer("checksum", set);
          const std::uint64_t computed =
              rows_checksum(out, row_bytes(type, info.components), info.rows, 0);
          if (computed != stored) throw checksum_mismatch(path_.string(), name, stored, computed);
          const std::string problem =
              non_finite_problem(path_.string(), name, type, out, info.rows * info.components);
          if (!problem.empty()) throw std::runtime_error(problem);
        }));
}

// ---- a workload's state as tables --------------------------------------------------------------

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

TableShare share_of(const CheckpointReader& checkpoint, const std::string& table) {
  const TableInfo& t = checkpoint.table(table);
  const int rank = rank_of(checkpoint.comm()), ranks = size_of(checkpoint.comm());
  TableShare share;
  share.own_rows = static_cast<int>(t.rank_rows.size()) == ranks;
  if (share.own_rows) {
    for (int r = 0; r < rank; ++r) share.first += static_cast<std::uint64_t>(t.rank_rows[r]);
    share.count = static_cast<std::uint64_t>(t.rank_rows[rank]);
  } else {
    share.first = t.rows * rank / ranks;
    share.count = t.rows * (rank + 1) / ranks - share.first;
  }
  return share;
}

void read_share(const CheckpointReader& checkpoint, const std::string& table,
                const TableShare& share, std::span<const ColumnTarget> columns) {
  for (const ColumnTarget& c : columns)
    checkpoint.read(table, c.name, c.type, share.first, share.count, c.out);
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

int remove_stale_checkpoints(const fs::path& output_dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(checkpoint_dir(output_dir), ec)) {
    const fs::path& p = item.path();
    if (p.extension() != ".tmp" || !step_of(p.parent_path() / p.stem())) continue;
    std::error_code ignored;
    if (fs::remove(p, ignored)) ++removed;
  }
  return removed;
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

// Reads a dataset in blocks and returns its checksum; `look` sees each block too (its rows and the
// index of the first).
using BlockVisitor = std::function<void(const void*, std::uint64_t, std::uint64_t)>;
std::uint64_t checksum_of(const Hdf5File& file, const DatasetInfo& info,
                          const BlockVisitor& look = {}) {
  const std::size_t bytes = row_bytes(info.type, info.components);
  // Read in 64 MiB pieces, and never more than the dataset holds (a small dataset's buffer is
  // small: inspect --verify of many small files stays fast).
  const std::uint64_t block =
      std::max<std::uint64_t>(1, std::min<std::uint64_t>((64u << 20) / bytes, info.rows));
  std::vector<unsigned char> buffer(block * bytes);
  std::uint64_t sum = 0;
  for (std::uint64_t first = 0; first < info.rows; first += block) {
    const std::uint64_t count = std::min<std::uint64_t>(block, info.rows - first);
    file.read(info.name, info.type, first, count, buffer.data());
    sum += rows_checksum(buffer.data(), bytes, count, first);
    if (look) look(buffer.data(), count, first);
  }
  return sum;
}

}  // namespace

std::pair<std::string, bool> inspect(const fs::path& path, bool verify) {
  const QuietHdf5Errors quiet;
  std::ostringstream out;
  bool ok = true;
  const Hdf5File file = Hdf5File::open_serial(path);
  const bool has_format = file.has_attribute("format");
  const bool is_checkpoint = has_format && file.text("format") == kCheckpointMagic;
  // What only a checkpoint has: a file with any of it but not the format is a damaged one.
  const bool looks_like_checkpoint =
      file.has_attribute("format_version") || file.has_attribute("workload") ||
      file.has_group(kStateGroup) || file.has_group(kArraysGroup) || file.has_group(kTablesGroup);
  struct Set {
    std::string name;
    std::optional<std::uint64_t> checksum;
    bool replicated = false;  // a checkpoint's replicated array: its values must be finite
  };
  std::vector<Set> sets;
  if (is_checkpoint) {
    const Manifest m = read_manifest(file);
    const CheckpointHeader& h = m.header;
    out << path.string() << ": apron checkpoint, format " << kCheckpointFormat << "\n"
        << "  workload " << h.workload << ", case '" << h.case_name << "', step " << h.step
        << ", time " << h.time << " s, dt " << h.dt << " s\n"
        << "  written by " << h.ranks << " rank(s), build " << h.build << ", seed " << h.seed
        << "\n  state:";
    for (const auto& [name, value] : h.scalars) out << " " << name << "=" << value;
    out << "\n  case file: " << h.config_text.size() << " bytes of YAML\n";
    const std::string problem = manifest_problem(file, m);
    out << "  header checksum " << hex(file.unsigned_integer("header_checksum"))
        << (problem.empty() ? " (verified)" : " (MISMATCH or out of range)") << "\n";
    if (!problem.empty()) {
      ok = false;
      out << "  error: " << problem << "\n";
    }
    for (const auto& [name, t] : m.tables) {
      out << "  table '" << name << "': " << t.rows << " rows; per rank:";
      for (const auto r : t.rank_rows) out << " " << r;
      out << "\n";
      for (const auto& [column, c] : t.columns)
        sets.push_back({column_path(name, column), c.checksum});
    }
    for (const auto& [name, c] : m.arrays) sets.push_back({array_path(name), c.checksum, true});
  } else if (looks_like_checkpoint) {
    throw std::runtime_error(path.string() +
                             ": a damaged apron checkpoint: its 'format' attribute is " +
                             (has_format ? "'" + file.text("format") + "'" : "missing") +
                             " (expected '" + kCheckpointMagic + "')");
  } else if (file.has_attribute("step") && file.has_attribute("time") &&
             file.has_attribute("ranks") &&
             (file.has_attribute("kind") || file.has_dataset("/position"))) {
    // A step of a visual output series (io/series_output.hpp).
    const std::string kind = file.has_attribute("kind") ? file.text("kind") : "points";
    const char* what = kind == "points" ? "particle" : kind == "mesh" ? "mesh" : "brick";
    if (kind != "points" && kind != "mesh" && kind != "bricks")
      throw std::runtime_error(path.string() + ": an output file of unknown kind '" + kind + "'");
    out << path.string() << ": apron " << what << " output, step " << file.integer("step")
        << ", time " << file.real("time") << " s, written by " << file.integer("ranks")
        << " rank(s); no checksums (visual output)\n";
    for (const std::string group : {"/", "/triangle_fields", "/bricks"})
      if (file.has_group(group))
        for (const auto& name : file.datasets(group)) sets.push_back({name, std::nullopt});
  } else {
    throw std::runtime_error(path.string() +
                             ": an HDF5 file, but neither an apron checkpoint nor an apron "
                             "particle output");
  }
  for (const auto& set : sets) {
    const DatasetInfo info = file.info(set.name);
    out << "  " << set.name << "  " << dtype_name(info.type) << " [" << info.rows;
    if (info.components != 1) out << " x " << info.components;
    out << "]  "
        << size_text(static_cast<double>(info.rows * row_bytes(info.type, info.components)));
    if (set.checksum) {
      out << "  checksum " << hex(*set.checksum);
      std::string problem;
      if (verify) {
        const auto look_at = [&](const void* rows, std::uint64_t count, std::uint64_t first) {
          if (problem.empty())
            problem = non_finite_problem(path.string(), leaf(set.name), info.type, rows,
                                         count * info.components, first * info.components);
        };
        const bool good =
            checksum_of(file, info, set.replicated ? BlockVisitor(look_at) : BlockVisitor()) ==
            *set.checksum;
        ok = ok && good && problem.empty();
        out << (good ? " (verified)" : " (MISMATCH: altered or damaged)");
      }
      if (!problem.empty()) out << "\n  error: " << problem;
    }
    out << "\n";
  }
  return {out.str(), ok};
}

std::pair<std::string, bool> inspect_isolated(const fs::path& path, bool verify,
                                              bool crashes_only) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return inspect(path, verify);  // no isolation to be had
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return inspect(path, verify);
  }
  if (child == 0) {
    // The child: one letter for the outcome, then the text. Never returns, never calls MPI.
    ::close(pipe_fds[0]);
    std::string reply;
    try {
      const auto [text, ok] = inspect(path, verify);
      reply = (ok ? "1" : "0") + text;
    } catch (const std::bad_alloc&) {
      reply = "M";
    } catch (const std::exception& e) {
      reply = std::string("E") + e.what();
    }
    for (std::size_t done = 0; done < reply.size();) {
      const ssize_t n = ::write(pipe_fds[1], reply.data() + done, reply.size() - done);
      if (n <= 0) ::_exit(1);
      done += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string reply;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  unsigned version[3] = {0, 0, 0};
  H5get_libversion(&version[0], &version[1], &version[2]);
  const std::string library = "libhdf5 " + std::to_string(version[0]) + "." +
                              std::to_string(version[1]) + "." + std::to_string(version[2]);
  if (WIFSIGNALED(status))
    throw std::runtime_error(path.string() + ": a damaged HDF5 file: " + library +
                             " crashed reading it (signal " + std::to_string(WTERMSIG(status)) +
                             "); it cannot be used (an earlier checkpoint may be sound)");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || reply.empty())
    throw std::runtime_error(path.string() + ": cannot inspect it (the checking process failed)");
  if (reply[0] == 'M')
    throw std::runtime_error(path.string() + ": a damaged HDF5 file: reading its metadata asks " +
                             library + " for more memory than there is (a damaged size field)");
  if (crashes_only) return {"", true};
  if (reply[0] == 'E') throw std::runtime_error(reply.substr(1));
  return {reply.substr(1), reply[0] == '1'};
}

}  // namespace apron::io
