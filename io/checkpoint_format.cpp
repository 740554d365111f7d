#include "io/checkpoint_format.hpp"

#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace apron::io::checkpoint_format {
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
                               const void* data, std::uint64_t count, std::uint64_t first) {
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

}  // namespace apron::io::checkpoint_format
