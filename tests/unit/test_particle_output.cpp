// ParticleSeriesWriter on however many ranks the test is launched with (1, 2 and 3 in ctest):
// steps with uneven per-rank counts, one rank empty, read back on rank 0 with serial HDF5 and
// compared with the data gathered from all ranks; the XDMF index; and failures, which must
// throw on every rank rather than leave some ranks waiting in a collective call.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "io/particle_output.hpp"

namespace apron::io {
namespace {

namespace fs = std::filesystem;

void barrier() {
  MPI_Barrier(MPI_COMM_WORLD);
}

std::string broadcast(std::string text) {
  unsigned long length = text.size();
  MPI_Bcast(&length, 1, MPI_UNSIGNED_LONG, 0, MPI_COMM_WORLD);
  text.resize(length);
  MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, 0, MPI_COMM_WORLD);
  return text;
}

// A fresh directory seen by all ranks, removed when the test ends.
class SharedTempDir {
 public:
  SharedTempDir() {
    std::string name;
    if (rank_of(MPI_COMM_WORLD) == 0) {
      name = (fs::temp_directory_path() / "apron_io_test_XXXXXX").string();
      if (mkdtemp(name.data()) == nullptr) name.clear();
    }
    path_ = broadcast(name);
    if (path_.empty()) throw std::runtime_error("mkdtemp failed");
  }
  ~SharedTempDir() {
    barrier();
    std::error_code ignored;
    if (rank_of(MPI_COMM_WORLD) == 0) fs::remove_all(path_, ignored);
  }
  SharedTempDir(const SharedTempDir&) = delete;
  SharedTempDir& operator=(const SharedTempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Rank 0 gets every rank's values in rank order, which is the order the file must hold them in.
template <class T>
std::vector<T> gather_on_root(const std::vector<T>& mine) {
  const int bytes = static_cast<int>(mine.size() * sizeof(T));
  std::vector<int> counts(size_of(MPI_COMM_WORLD)), displs(size_of(MPI_COMM_WORLD));
  MPI_Gather(&bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
  std::vector<T> all(rank_of(MPI_COMM_WORLD) == 0 ? (displs.back() + counts.back()) / sizeof(T)
                                                  : 0);
  MPI_Gatherv(mine.data(), bytes, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, 0,
              MPI_COMM_WORLD);
  return all;
}

struct Particles {
  std::vector<float> position, velocity, density;
  std::vector<std::int64_t> id;
  std::vector<std::uint8_t> kind;

  std::size_t size() const { return id.size(); }
  std::vector<HostField> fields() const {
    return {{"position", Dtype::f32, 3, position.data()},
            {"velocity", Dtype::f32, 3, velocity.data()},
            {"density", Dtype::f32, 1, density.data()},
            {"id", Dtype::i64, 1, id.data()},
            {"kind", Dtype::u8, 1, kind.data()}};
  }
  Particles gathered() const {
    return {gather_on_root(position), gather_on_root(velocity), gather_on_root(density),
            gather_on_root(id), gather_on_root(kind)};
  }
};

// Values that differ by rank, particle, component and step (all exact in float), so a row in
// the wrong place or a stale file shows up. ids exceed 32 bits; kinds exceed 127.
Particles make_particles(std::size_t n, long step) {
  Particles p;
  for (std::size_t i = 0; i < n; ++i) {
    const float base =
        static_cast<float>(100000 * step + 1000 * rank_of(MPI_COMM_WORLD) + static_cast<long>(i));
    for (int c = 0; c < 3; ++c) {
      p.position.push_back(base + 0.25f * static_cast<float>(c));
      p.velocity.push_back(-base - 0.5f * static_cast<float>(c));
    }
    p.density.push_back(1000.0f + base / 8);
    p.id.push_back(5'000'000'000LL + static_cast<std::int64_t>(base));
    p.kind.push_back(
        static_cast<std::uint8_t>(200 + 17 * rank_of(MPI_COMM_WORLD) + static_cast<int>(i)));
  }
  return p;
}

// Uneven counts; with more than one rank, one rank (a different one per step) has none.
std::size_t count_for(int step_index) {
  const int rank = rank_of(MPI_COMM_WORLD), size = size_of(MPI_COMM_WORLD);
  const int empty_rank = step_index == 0 ? size - 1 : 0;
  if (size > 1 && rank == empty_rank) return 0;
  return static_cast<std::size_t>(step_index == 0 ? 5 + 3 * rank : 2 + rank);
}

std::string step_file(const std::string& basename, long step) {
  char digits[16];
  std::snprintf(digits, sizeof digits, "_%06ld.h5", step);
  return basename + digits;
}

// ---- reading back with serial HDF5 (rank 0) --------------------------------------------------

// Closes an HDF5 id at scope exit.
struct Id {
  Id(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  ~Id() {
    if (id >= 0) close(id);
  }
  hid_t id;
  herr_t (*close)(hid_t);
};

template <class T>
void expect_dataset(hid_t file, const std::string& name, hid_t memory_type, hid_t file_type,
                    const std::vector<hsize_t>& dims, const std::vector<T>& expected) {
  SCOPED_TRACE("dataset " + name);
  const Id set{H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose};
  ASSERT_GE(set.id, 0);
  const Id type{H5Dget_type(set.id), H5Tclose};
  EXPECT_GT(H5Tequal(type.id, file_type), 0);
  const Id space{H5Dget_space(set.id), H5Sclose};
  std::vector<hsize_t> actual(static_cast<std::size_t>(H5Sget_simple_extent_ndims(space.id)));
  H5Sget_simple_extent_dims(space.id, actual.data(), nullptr);
  ASSERT_EQ(actual, dims);
  std::vector<T> values(expected.size());
  if (!values.empty()) {
    ASSERT_GE(H5Dread(set.id, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
  }
  EXPECT_EQ(values, expected);
}

template <class T>
T read_attribute(hid_t file, const char* name, hid_t memory_type, hid_t file_type) {
  SCOPED_TRACE(std::string("attribute ") + name);
  T value{};
  const Id attribute{H5Aopen(file, name, H5P_DEFAULT), H5Aclose};
  EXPECT_GE(attribute.id, 0);
  if (attribute.id < 0) return value;
  const Id type{H5Aget_type(attribute.id), H5Tclose};
  EXPECT_GT(H5Tequal(type.id, file_type), 0);
  EXPECT_GE(H5Aread(attribute.id, memory_type, &value), 0);
  return value;
}

struct Written {
  long step;
  double time;
  Particles all;  // gathered: complete on rank 0 only
};

void expect_step_file(const fs::path& path, const Written& w) {
  SCOPED_TRACE(path.string());
  const Id file{H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose};
  ASSERT_GE(file.id, 0);
  EXPECT_EQ(read_attribute<std::int64_t>(file.id, "step", H5T_NATIVE_INT64, H5T_STD_I64LE), w.step);
  EXPECT_EQ(read_attribute<double>(file.id, "time", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE), w.time);
  EXPECT_EQ(read_attribute<std::int64_t>(file.id, "ranks", H5T_NATIVE_INT64, H5T_STD_I64LE),
            size_of(MPI_COMM_WORLD));
  const hsize_t n = w.all.size();
  expect_dataset(file.id, "position", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, {n, 3}, w.all.position);
  expect_dataset(file.id, "velocity", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, {n, 3}, w.all.velocity);
  expect_dataset(file.id, "density", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, {n}, w.all.density);
  expect_dataset(file.id, "id", H5T_NATIVE_INT64, H5T_STD_I64LE, {n}, w.all.id);
  expect_dataset(file.id, "kind", H5T_NATIVE_UINT8, H5T_STD_U8LE, {n}, w.all.kind);
  H5G_info_t info{};
  ASSERT_GE(H5Gget_info(file.id, &info), 0);
  EXPECT_EQ(info.nlinks, 5u) << "exactly one dataset per field";
}

// ---- the XDMF index ----------------------------------------------------------------------------

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The XML without the indentation between tags, so checks do not depend on layout.
std::string compact(const std::string& xml) {
  std::string out;
  bool after_tag = false;
  for (const char c : xml) {
    if (after_tag && std::isspace(static_cast<unsigned char>(c))) continue;
    after_tag = c == '>';
    out += c;
  }
  return out;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// From the grid's opening tag to its closing one.
std::string grid_text(const std::string& xml, const std::string& name) {
  const auto begin = xml.find("<Grid Name=\"" + name + "\"");
  if (begin == std::string::npos) return {};
  return xml.substr(begin, xml.find("</Grid>", begin) - begin);
}

std::string data_item(const std::string& dims, const std::string& number, const std::string& file,
                      const std::string& name) {
  return "<DataItem Dimensions=\"" + dims + "\" " + number + " Format=\"HDF\">" + file + ":/" +
         name + "</DataItem>";
}

void expect_grid(const std::string& xml, const std::string& basename, long step,
                 const std::string& time, std::size_t n) {
  const std::string file = step_file(basename, step), count = std::to_string(n);
  const std::string grid = grid_text(xml, fs::path(file).stem().string());
  SCOPED_TRACE(grid);
  ASSERT_FALSE(grid.empty()) << "no grid for step " << step;
  const std::string f32 = R"(NumberType="Float" Precision="4")";
  const std::string expected[] = {
      R"(GridType="Uniform">)",
      "<Time Value=\"" + time + "\"/>",
      R"(<Topology TopologyType="Polyvertex" NumberOfElements=")" + count +
          R"(" NodesPerElement="1"/>)",
      R"(<Geometry GeometryType="XYZ">)" + data_item(count + " 3", f32, file, "position") +
          "</Geometry>",
      R"(<Attribute Name="velocity" AttributeType="Vector" Center="Node">)" +
          data_item(count + " 3", f32, file, "velocity") + "</Attribute>",
      R"(<Attribute Name="density" AttributeType="Scalar" Center="Node">)" +
          data_item(count, f32, file, "density") + "</Attribute>",
      R"(<Attribute Name="id" AttributeType="Scalar" Center="Node">)" +
          data_item(count, R"(NumberType="Int" Precision="8")", file, "id") + "</Attribute>",
      R"(<Attribute Name="kind" AttributeType="Scalar" Center="Node">)" +
          data_item(count, R"(NumberType="UChar" Precision="1")", file, "kind") + "</Attribute>",
  };
  for (const std::string& e : expected) EXPECT_NE(grid.find(e), std::string::npos) << e;
  EXPECT_EQ(occurrences(grid, "<Attribute "), 4u);
}

void expect_series_header(const std::string& xml, const fs::path& dir, std::size_t grids) {
  EXPECT_EQ(xml.rfind("<?xml", 0), 0u);
  EXPECT_NE(xml.find(R"(<Xdmf Version="3.0">)"), std::string::npos);
  EXPECT_EQ(occurrences(xml, R"(GridType="Collection" CollectionType="Temporal")"), 1u);
  EXPECT_EQ(occurrences(xml, R"(GridType="Uniform")"), grids);
  EXPECT_EQ(xml.find(dir.string()), std::string::npos) << "paths must be relative";
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename());
  return names;
}

// ---- the tests -------------------------------------------------------------------------------

TEST(ParticleOutput, TwoStepsWithUnevenCountsReadBackOnRankZero) {
  const SharedTempDir tmp;
  const fs::path dir = tmp.path() / "nested" / "out";  // the writer must create it
  ParticleSeriesWriter writer(MPI_COMM_WORLD, dir, "out");
  EXPECT_EQ(writer.series_path(), dir / "out.xmf");
  const long steps[] = {3, 7};
  const double times[] = {0.1, 0.25};
  std::vector<Written> written;
  for (int k = 0; k < 2; ++k) {
    const Particles mine = make_particles(count_for(k), steps[k]);
    writer.write(steps[k], times[k], mine.size(), mine.fields());
    written.push_back({steps[k], times[k], mine.gathered()});
  }
  if (rank_of(MPI_COMM_WORLD) != 0) return;
  for (const Written& w : written) expect_step_file(dir / step_file("out", w.step), w);
  EXPECT_EQ(files_in(dir), (std::set<std::string>{"out_000003.h5", "out_000007.h5", "out.xmf"}))
      << "no .tmp may remain";
  const std::string xml = compact(read_text(dir / "out.xmf"));
  expect_series_header(xml, dir, 2);
  expect_grid(xml, "out", 3, "0.1", written[0].all.size());
  expect_grid(xml, "out", 7, "0.25", written[1].all.size());
  EXPECT_LT(xml.find("out_000003"), xml.find("out_000007"));
}

TEST(ParticleOutput, AllRanksEmpty) {
  const SharedTempDir tmp;
  ParticleSeriesWriter writer(MPI_COMM_WORLD, tmp.path(), "empty");
  const Particles none;  // data pointers are null
  writer.write(0, 0.0, 0, none.fields());
  if (rank_of(MPI_COMM_WORLD) != 0) return;
  expect_step_file(tmp.path() / "empty_000000.h5", {0, 0.0, none});
  const std::string xml = compact(read_text(tmp.path() / "empty.xmf"));
  expect_series_header(xml, tmp.path(), 1);
  expect_grid(xml, "empty", 0, "0", 0);
}

TEST(ParticleOutput, SameStepWrittenTwiceKeepsOneEntry) {
  const SharedTempDir tmp;
  ParticleSeriesWriter writer(MPI_COMM_WORLD, tmp.path(), "p");
  const Particles first = make_particles(count_for(0), 5), second = make_particles(count_for(1), 6);
  writer.write(5, 1.0, first.size(), first.fields());
  writer.write(5, 1.5, second.size(), second.fields());
  const Particles all = second.gathered();
  if (rank_of(MPI_COMM_WORLD) != 0) return;
  expect_step_file(tmp.path() / "p_000005.h5", {5, 1.5, all});
  const std::string xml = compact(read_text(tmp.path() / "p.xmf"));
  expect_series_header(xml, tmp.path(), 1);
  expect_grid(xml, "p", 5, "1.5", all.size());
}

// Open HDF5 files and objects in them (datasets, attributes, ...), to show a failed write leaks
// none. (Dataspaces and property lists cannot be counted through the public API.)
long long open_hdf5_ids() {
  return static_cast<long long>(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL));
}

// Runs `write` on every rank; each rank must throw E with `needle` in its message, and all ranks
// must (one rank going on alone would hang the next collective call).
template <class E, class F>
void expect_throw_on_every_rank(F&& write, const std::string& needle) {
  H5open();
  const long long ids_before = open_hdf5_ids();
  int threw = 0;
  try {
    write();
  } catch (const E& e) {
    threw = 1;
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "rank " << rank_of(MPI_COMM_WORLD) << " threw the wrong type: " << e.what();
  }
  EXPECT_EQ(threw, 1) << "rank " << rank_of(MPI_COMM_WORLD) << " did not throw";
  int ranks_that_threw = 0;
  MPI_Allreduce(&threw, &ranks_that_threw, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(ranks_that_threw, size_of(MPI_COMM_WORLD));
  EXPECT_EQ(open_hdf5_ids(), ids_before) << "HDF5 handles leaked on the error path";
}

// Something in the way of a name the writer needs, made by rank 0 and seen by all ranks.
void block_with_directory(const fs::path& path) {
  if (rank_of(MPI_COMM_WORLD) == 0) fs::create_directories(path / "in_the_way");
  barrier();
}

TEST(ParticleOutput, DirectoryUnderARegularFileThrowsOnEveryRank) {
  const SharedTempDir tmp;
  if (rank_of(MPI_COMM_WORLD) == 0)
    std::ofstream(tmp.path() / "regular_file") << "not a directory\n";
  barrier();
  const fs::path dir = tmp.path() / "regular_file" / "out";
  ParticleSeriesWriter writer(MPI_COMM_WORLD, dir, "p");
  const Particles mine = make_particles(count_for(0), 1);
  expect_throw_on_every_rank<std::runtime_error>(
      [&] { writer.write(1, 0.5, mine.size(), mine.fields()); }, dir.string());
}

TEST(ParticleOutput, UncreatableStepFileThrowsOnEveryRankAndWriterRecovers) {
  const SharedTempDir tmp;
  block_with_directory(tmp.path() / "p_000001.h5.tmp");
  ParticleSeriesWriter writer(MPI_COMM_WORLD, tmp.path(), "p");
  const Particles mine = make_particles(count_for(1), 1);
  expect_throw_on_every_rank<std::runtime_error>(
      [&] { writer.write(1, 0.5, mine.size(), mine.fields()); },
      (tmp.path() / "p_000001.h5").string());
  if (rank_of(MPI_COMM_WORLD) == 0) fs::remove_all(tmp.path() / "p_000001.h5.tmp");
  barrier();
  writer.write(1, 0.5, mine.size(), mine.fields());
  const Particles all = mine.gathered();
  if (rank_of(MPI_COMM_WORLD) != 0) return;
  expect_step_file(tmp.path() / "p_000001.h5", {1, 0.5, all});
  EXPECT_EQ(files_in(tmp.path()), (std::set<std::string>{"p_000001.h5", "p.xmf"}));
}

TEST(ParticleOutput, BlockedFinalNameThrowsOnEveryRank) {
  const SharedTempDir tmp;
  block_with_directory(tmp.path() / "p_000002.h5");
  ParticleSeriesWriter writer(MPI_COMM_WORLD, tmp.path(), "p");
  const Particles mine = make_particles(count_for(0), 2);
  expect_throw_on_every_rank<std::runtime_error>(
      [&] { writer.write(2, 0.5, mine.size(), mine.fields()); },
      (tmp.path() / "p_000002.h5").string());
}

TEST(ParticleOutput, UnwritableSeriesIndexThrowsOnEveryRank) {
  const SharedTempDir tmp;
  block_with_directory(tmp.path() / "p.xmf.tmp");
  ParticleSeriesWriter writer(MPI_COMM_WORLD, tmp.path(), "p");
  const Particles mine = make_particles(count_for(0), 4);
  expect_throw_on_every_rank<std::runtime_error>(
      [&] { writer.write(4, 0.5, mine.size(), mine.fields()); }, (tmp.path() / "p.xmf").string());
  if (rank_of(MPI_COMM_WORLD) == 0) {
    EXPECT_TRUE(fs::exists(tmp.path() / "p_000004.h5"));
  }
}

TEST(ParticleOutput, MissingDataOnOneRankThrowsOnEveryRank) {
  const SharedTempDir tmp;
  ParticleSeriesWriter writer(MPI_COMM_WORLD, tmp.path(), "p");
  Particles mine = make_particles(3, 1);
  std::vector<HostField> fields = mine.fields();
  if (rank_of(MPI_COMM_WORLD) == size_of(MPI_COMM_WORLD) - 1) fields[2].data = nullptr;
  expect_throw_on_every_rank<std::runtime_error>([&] { writer.write(1, 0.5, mine.size(), fields); },
                                                 "density");
}

TEST(ParticleOutput, DifferentFieldListsThrowOnEveryRank) {
  if (size_of(MPI_COMM_WORLD) == 1) GTEST_SKIP() << "needs two ranks";
  const SharedTempDir tmp;
  ParticleSeriesWriter writer(MPI_COMM_WORLD, tmp.path(), "p");
  const Particles mine = make_particles(2, 1);
  std::vector<HostField> fields = mine.fields();
  if (rank_of(MPI_COMM_WORLD) == 1) fields.pop_back();
  expect_throw_on_every_rank<std::logic_error>([&] { writer.write(1, 0.5, mine.size(), fields); },
                                               "field lists");
}

TEST(ParticleOutput, NoPositionThrowsOnEveryRank) {
  const SharedTempDir tmp;
  ParticleSeriesWriter writer(MPI_COMM_WORLD, tmp.path(), "p");
  const Particles mine = make_particles(2, 1);
  std::vector<HostField> fields = mine.fields();
  fields.erase(fields.begin());
  expect_throw_on_every_rank<std::invalid_argument>(
      [&] { writer.write(1, 0.5, mine.size(), fields); }, "position");
}

// Rank 0 keeps GoogleTest's printer; other ranks print only their failures, tagged with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
    }
  }

 private:
  int rank_;
};

}  // namespace
}  // namespace apron::io

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = apron::io::rank_of(MPI_COMM_WORLD);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new apron::io::FailurePrinter(rank));
  }
  const int result = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
