// io::DiagnosticsTable: a new run starts the table afresh (even over a stale .tmp), a restart keeps
// the rows up to the checkpoint's step, from the finished table or the .tmp a killed run left.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/diagnostic_columns.hpp"
#include "io/atomic_file.hpp"
#include "io/diagnostics_table.hpp"

namespace apron::io {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path fresh_dir(const char* name) {
  const fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(DiagnosticsTable, NewRunIgnoresAStaleTemporaryTable) {
  const fs::path path = fresh_dir("apron_diag_new") / "diagnostics.csv";
  std::ofstream(temporary_name(path)) << "step,x\n7,old\n";
  DiagnosticsTable t(path, "step,x");
  t.open(std::nullopt);
  t.append("0,a");
  t.close();
  EXPECT_EQ(read(path), "step,x\n0,a\n");
  EXPECT_FALSE(fs::exists(temporary_name(path)));
}

TEST(DiagnosticsTable, RestartKeepsRowsUpToTheCheckpointStep) {
  const fs::path path = fresh_dir("apron_diag_resume") / "diagnostics.csv";
  DiagnosticsTable first(path, "step,x");
  first.open(std::nullopt);
  for (const char* row : {"0,a", "10,b", "20,c", "30,d"}) first.append(row);
  first.close();
  DiagnosticsTable again(path, "step,x");
  again.open(20);
  again.append("30,e");
  EXPECT_EQ(read(temporary_name(path)), "step,x\n0,a\n10,b\n20,c\n30,e\n");
  again.close();
  EXPECT_EQ(read(path), "step,x\n0,a\n10,b\n20,c\n30,e\n");
}

TEST(DiagnosticsTable, RestartAfterAKillContinuesTheTemporaryTable) {
  const fs::path path = fresh_dir("apron_diag_killed") / "diagnostics.csv";
  std::ofstream(temporary_name(path)) << "step,x\n0,a\n10,b\n20,c\n";  // no finished table
  DiagnosticsTable t(path, "step,x");
  t.open(10);
  t.close();
  EXPECT_EQ(read(path), "step,x\n0,a\n10,b\n");
}

// A finished table (run A, to step 20) and a .tmp one (run B continued it to step 40 and was
// killed): a restart from step 30 continues B's, the newer one.
TEST(DiagnosticsTable, RestartPrefersTheTemporaryTableOverAnOlderFinishedOne) {
  const fs::path path = fresh_dir("apron_diag_newer") / "diagnostics.csv";
  std::ofstream(path) << "step,x\n0,a\n10,b\n20,c\n";
  std::ofstream(temporary_name(path)) << "step,x\n0,a\n10,b\n20,c\n30,d\n40,e\n";
  DiagnosticsTable t(path, "step,x");
  t.open(30);
  t.close();
  EXPECT_EQ(read(path), "step,x\n0,a\n10,b\n20,c\n30,d\n");
}

}  // namespace
}  // namespace apron::io

// The time-stepping core's column list: one description gives the header and every row.
namespace apron {
namespace {

TEST(DiagnosticColumns, HeaderAndRowsComeFromOneDescription) {
  const DiagnosticColumns columns({{"step", 0}, {"time", 9}, {"particles", 0}, {"kinetic", 4}});
  EXPECT_EQ(columns.header(), "step,time,particles,kinetic");
  const double row[] = {12, 0.123456789012, 9007199254740992.0, 1234.5678};
  // Counts print exactly (2^53 included), reals with their column's significant digits.
  EXPECT_EQ(columns.row(row), "12,0.123456789,9007199254740992,1235");
}

TEST(DiagnosticColumns, ARowOfTheWrongLengthIsAProgrammingError) {
  const DiagnosticColumns columns({{"step", 0}, {"time", 9}});
  const double short_row[] = {1};
  EXPECT_THROW(columns.row(short_row), std::logic_error);
}

}  // namespace
}  // namespace apron
