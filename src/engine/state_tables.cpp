#include "engine/state_tables.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace apron {
namespace {

std::string shape_text(const std::string& rows, int components, io::Dtype type) {
  return "(" + rows + ", " + std::to_string(components) + ") " + io::dtype_name(type);
}

template <class T>
bool finite_row(const unsigned char* row, int components) {
  for (int c = 0; c < components; ++c) {
    T v;
    std::memcpy(&v, row + c * sizeof(T), sizeof(T));
    if (!std::isfinite(v)) return false;
  }
  return true;
}

template <class T>
bool inside_row(const unsigned char* row, const Box& domain) {
  for (int d = 0; d < 3; ++d) {
    T v;
    std::memcpy(&v, row + d * sizeof(T), sizeof(T));
    if (!(v >= domain.lo[d] && v <= domain.hi[d])) return false;
  }
  return true;
}

// What is wrong with one row, if anything (0: nothing).
enum Fault : std::uint64_t { kNone = 0, kNotFinite = 1, kOutside = 2, kNotPositive = 3 };

template <class T>
bool positive_last(const unsigned char* row, int components) {
  T v;
  std::memcpy(&v, row + (components - 1) * sizeof(T), sizeof(T));
  return v > 0;
}

Fault row_fault(const ColumnSpec& c, const unsigned char* row, const Box& domain) {
  if (c.check == ValueCheck::any || (c.type != io::Dtype::f32 && c.type != io::Dtype::f64))
    return kNone;
  const bool f32 = c.type == io::Dtype::f32;
  if (!(f32 ? finite_row<float>(row, c.components) : finite_row<double>(row, c.components)))
    return kNotFinite;
  if (c.check == ValueCheck::inside_domain &&
      !(f32 ? inside_row<float>(row, domain) : inside_row<double>(row, domain)))
    return kOutside;
  if (c.check == ValueCheck::positive_last &&
      !(f32 ? positive_last<float>(row, c.components) : positive_last<double>(row, c.components)))
    return kNotPositive;
  return kNone;
}

}  // namespace

// ---- save --------------------------------------------------------------------------------------

void SavedState::rows(const std::string& table, std::size_t rows, std::vector<ColumnRows> columns) {
  const auto spec = std::find_if(tables_.begin(), tables_.end(),
                                 [&](const TableSpec& t) { return t.name == table; });
  if (spec == tables_.end() || spec->columns.size() != columns.size())
    throw std::logic_error("saved rows of table '" + table + "' do not match its declaration");
  io::StateTable t{table, rows, {}};
  for (std::size_t k = 0; k < columns.size(); ++k) {
    const ColumnSpec& c = spec->columns[k];
    t.columns.push_back(
        {{c.name, c.type, c.components, columns[k].data}, std::move(columns[k].checksum)});
  }
  state_.tables.push_back(std::move(t));
}

void SavedState::partition(const Partition& partition) {
  for (const Box& b : partition.subdomains())
    partition_.insert(partition_.end(), {b.lo[0], b.lo[1], b.lo[2], b.hi[0], b.hi[1], b.hi[2]});
}

io::CheckpointState SavedState::finish(io::CheckpointHeader header) {
  for (const TableSpec& spec : tables_)
    if (std::none_of(state_.tables.begin(), state_.tables.end(),
                     [&](const io::StateTable& t) { return t.name == spec.name; }))
      throw std::logic_error("table '" + spec.name + "' was declared but not saved");
  if (!partition_.empty()) {
    auto boxes = std::make_shared<std::vector<double>>(std::move(partition_));
    state_.replicated.push_back(
        {{"partition", io::Dtype::f64, 6, boxes->data()}, boxes->size() / 6});
    state_.keep.push_back(boxes);
  }
  header.scalars.insert(scalars_.begin(), scalars_.end());
  header.seed = seed_;
  state_.header = std::move(header);
  return std::move(state_);
}

// ---- load --------------------------------------------------------------------------------------

LoadedState::LoadedState(const io::CheckpointReader& checkpoint,
                         const std::vector<TableSpec>& tables, const Box& domain)
    : checkpoint_(checkpoint), where_(checkpoint.path().string()) {
  for (const TableSpec& spec : tables) read(spec, domain);
}

double LoadedState::scalar(const std::string& name) const {
  const auto& scalars = header().scalars;
  const auto found = scalars.find(name);
  if (found == scalars.end())
    throw std::runtime_error(where_ + ": the checkpoint has no state '" + name + "'");
  return found->second;
}

const LoadedState::Table& LoadedState::find(const std::string& table) const {
  const auto found = tables_.find(table);
  if (found == tables_.end()) throw std::logic_error("table '" + table + "' is not declared");
  return found->second;
}

// The metadata checks give every rank the same answer (they read the same header); the value
// checks agree on the lowest bad row over all ranks before any throws.
void LoadedState::read(const TableSpec& spec, const Box& domain) {
  const std::string table = "table '" + spec.name + "'";
  if (!checkpoint_.has_table(spec.name))
    throw std::runtime_error(where_ + ": the checkpoint has no " + table +
                             " (written by an incompatible version?)");
  const io::TableInfo& info = checkpoint_.table(spec.name);
  if (!spec.rows_scalar.empty() && scalar(spec.rows_scalar) != static_cast<double>(info.rows))
    throw std::runtime_error(where_ + ": " + table + " has " + std::to_string(info.rows) +
                             " rows, but the state's '" + spec.rows_scalar + "' says " +
                             std::to_string(scalar(spec.rows_scalar)) + ": it is damaged");
  Table& t = tables_[spec.name];
  t.share = io::share_of(checkpoint_, spec.name);
  t.total = info.rows;
  same_ranks_ = same_ranks_ && t.share.own_rows;
  // The first fault as one number, (row * columns + column) * 4 + fault, so that the lowest over
  // all ranks names its row and column at once.
  const std::uint64_t columns = spec.columns.size();
  std::uint64_t first_fault = std::numeric_limits<std::uint64_t>::max();
  for (std::uint64_t k = 0; k < columns; ++k) {
    const ColumnSpec& c = spec.columns[k];
    const auto stored = std::find_if(info.columns.begin(), info.columns.end(),
                                     [&](const io::DatasetInfo& d) { return d.name == c.name; });
    if (stored == info.columns.end())
      throw std::runtime_error(where_ + ": " + table + " has no column '" + c.name +
                               "' (written by an incompatible version?)");
    if (stored->type != c.type || stored->components != c.components)
      throw std::runtime_error(
          where_ + ": column '" + c.name + "' of " + table + " holds " +
          shape_text(std::to_string(stored->rows), stored->components, stored->type) +
          " values, expected " + shape_text("rows", c.components, c.type) + ": it is damaged");
    auto& [width, bytes] = t.columns[c.name];
    width = c.row_bytes();
    bytes.resize(t.share.count * width);
    checkpoint_.read(spec.name, c.name, c.type, t.share.first, t.share.count, bytes.data());
    for (std::uint64_t row = 0; row < t.share.count; ++row)
      if (const Fault f = row_fault(c, bytes.data() + row * width, domain)) {
        first_fault = std::min(first_fault, ((t.share.first + row) * columns + k) * 4 + f);
        break;
      }
  }
  std::uint64_t lowest = first_fault;
  MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_UINT64_T, MPI_MIN, checkpoint_.comm());
  if (lowest == std::numeric_limits<std::uint64_t>::max()) return;
  const std::uint64_t row = lowest / 4 / columns, column = lowest / 4 % columns;
  const std::uint64_t fault = lowest % 4;
  const std::string what = fault == kNotFinite ? "a value that is not finite"
                           : fault == kOutside ? "a position outside the case's domain"
                                               : "a last component that is not positive";
  throw std::runtime_error(where_ + ": column '" + spec.columns[column].name + "' of " + table +
                           ", row " + std::to_string(row) + ": " + what + ": it is damaged");
}

const Partition& LoadedState::saved_partition() const {
  if (!partition_) throw std::logic_error("the saved partition was not read");
  return *partition_;
}

void LoadedState::read_partition(const Box& domain) {
  const auto ranks = checkpoint_.replicated_rows("partition");
  if (ranks != static_cast<std::uint64_t>(header().ranks))
    throw std::runtime_error(where_ + ": the partition has " + std::to_string(ranks) +
                             " subdomains for " + std::to_string(header().ranks) + " ranks");
  std::vector<double> rows(6 * ranks);
  checkpoint_.read_all("partition", io::Dtype::f64, rows.data());  // refuses non-finite values
  std::vector<Box> subdomains(ranks);
  for (std::size_t r = 0; r < ranks; ++r)
    for (int d = 0; d < 3; ++d)
      subdomains[r].lo[d] = rows[6 * r + d], subdomains[r].hi[d] = rows[6 * r + 3 + d];
  partition_.emplace(domain, subdomains);
}

}  // namespace apron
