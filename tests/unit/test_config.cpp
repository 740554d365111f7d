// Case files: a valid case parses; every kind of bad input is refused with a message that names
// the file, the line, the key and what is accepted.
#include <gtest/gtest.h>

#include <string>

#include "config/case_config.hpp"
#include "config/yaml_reader.hpp"
#include "sph/sph_config.hpp"

namespace apron::config {
namespace {

const std::string kValid = R"(workload: sph
name: t
domain: {lo: [-0.1, -0.1, -0.1], hi: [1.1, 0.2, 1]}
sph:
  spacing: 0.02
fluid:
  - {lo: [0, 0, 0], hi: [0.2, 0.1, 0.4]}
boundary:
  tank: {lo: [0, 0, 0], hi: [1, 0.1, 0.8]}
time:
  end: 0.1
)";

std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  try {
    parse_case_text("case.yaml", text, sets);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& text, std::vector<std::string> parts,
                  const std::vector<std::string>& sets = {}) {
  const std::string msg = error_of(text, sets);
  ASSERT_FALSE(msg.empty()) << "accepted:\n" << text;
  for (const auto& part : parts)
    EXPECT_NE(msg.find(part), std::string::npos) << msg << "\n  lacks: " << part;
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(Config, ValidCaseParsesWithDefaults) {
  const auto c = parse_case_text("case.yaml", kValid, {});
  const auto& s = sph::sph_case(c);
  EXPECT_EQ(s.sph.spacing, 0.02);
  EXPECT_EQ(s.sph.smoothing_ratio, 1.3);
  EXPECT_EQ(s.fluid_blocks.size(), 1u);
  EXPECT_TRUE(s.boundary.has_tank);
  EXPECT_EQ(s.boundary.layers, 3);
  EXPECT_EQ(c.decomposition.method, "rcb");
  EXPECT_EQ(c.text, kValid);
}

TEST(Config, UnknownKeyNamesLineAndSuggestion) {
  expect_error(replace(kValid, "  spacing: 0.02", "  spacing: 0.02\n  spcing: 3"),
               {"case.yaml:6:", "unknown key 'sph.spcing'", "did you mean 'spacing'", "accepted"});
  expect_error(kValid + "colour: blue\n", {"case.yaml:12:1:", "unknown key 'colour'"});
}

TEST(Config, NegativeSpacing) {
  expect_error(replace(kValid, "spacing: 0.02", "spacing: -0.02"),
               {"case.yaml:5:", "sph.spacing", "greater than 0"});
}

TEST(Config, WrongType) {
  expect_error(replace(kValid, "end: 0.1", "end: soon"),
               {"case.yaml:11:8:", "time.end", "a number", "soon"});
  expect_error(replace(kValid, "hi: [0.2, 0.1, 0.4]", "hi: [0.2, 0.1]"),
               {"fluid[0].hi", "3 numbers"});
}

TEST(Config, FluidOutsideDomain) {
  expect_error(replace(kValid, "hi: [0.2, 0.1, 0.4]", "hi: [0.2, 0.1, 1.5]"),
               {"case.yaml", "fluid", "not inside the domain", "enlarge 'domain'"});
}

TEST(Config, FluidOutsideTankAndTankOutsideDomain) {
  expect_error(replace(kValid, "tank: {lo: [0, 0, 0]", "tank: {lo: [0.3, 0, 0]"),
               {"not inside boundary.tank"});
  expect_error(replace(kValid, "lo: [-0.1, -0.1, -0.1]", "lo: [0, -0.1, -0.1]"),
               {"wall layers", "enlarge 'domain'"});
}

TEST(Config, ChoiceListsAcceptedValues) {
  expect_error(kValid + "decomposition: {method: slices}\n",
               {"decomposition.method", "'slices' is not one of: cartesian, rcb"});
}

TEST(Config, MissingRequiredKeyAndBadYaml) {
  expect_error(replace(kValid, "time:\n  end: 0.1\n", ""), {"time.end", "required"});
  expect_error("a: [1, 2\n", {"case.yaml:", "YAML syntax error"});
  EXPECT_THROW(parse_case("/nonexistent/case.yaml", {}), ConfigError);
}

TEST(Config, SetOverridesAndErrors) {
  const auto c =
      parse_case_text("case.yaml", kValid,
                      {"time.end=0.5", "output.dir=elsewhere", "decomposition.dims=[2, 1, 1]"});
  EXPECT_EQ(c.time.end, 0.5);
  EXPECT_EQ(c.output.dir, "elsewhere");
  EXPECT_EQ(c.decomposition.dims[0], 2);
  expect_error(kValid, {"--set", "key.path=value"}, {"time.end"});
  expect_error(kValid, {"unknown key 'time.ends'"}, {"time.ends=3"});
  expect_error(kValid, {"sph.spacing", "greater than 0"}, {"sph.spacing=0"});
  expect_error(kValid, {"sph.wall_viscosity", "not both"},
               {"sph.wall_alpha=0.3", "sph.wall_viscosity=0.01"});
}

// The catalyst section: off when absent; on (built-in writer) when present, even empty; scripts
// must exist; every and fail_on_error are checked like everything else.
TEST(Config, CatalystSection) {
  EXPECT_FALSE(parse_case_text("case.yaml", kValid, {}).catalyst.enabled);
  const auto builtin = parse_case_text("case.yaml", kValid + "catalyst: {}\n", {});
  EXPECT_TRUE(builtin.catalyst.enabled);
  EXPECT_TRUE(builtin.catalyst.scripts.empty());
  EXPECT_EQ(builtin.catalyst.every, 1);
  EXPECT_FALSE(builtin.catalyst.fail_on_error);
  EXPECT_TRUE(parse_case_text("case.yaml", kValid + "catalyst:\n", {}).catalyst.enabled);
  const auto set = parse_case_text("case.yaml", kValid, {"catalyst.every=10"});
  EXPECT_TRUE(set.catalyst.enabled);
  EXPECT_EQ(set.catalyst.every, 10);

  expect_error(kValid + "catalyst: {every: 0}\n",
               {"case.yaml:12:", "catalyst.every", "at least 1"});
  expect_error(kValid + "catalyst: {fail_on_error: maybe}\n",
               {"catalyst.fail_on_error", "true or false"});
  expect_error(kValid + "catalyst: {scripts: [/nowhere/view.py]}\n",
               {"catalyst.scripts", "'/nowhere/view.py' does not exist"});
  expect_error(kValid + "catalyst: {scripts: view.py}\n", {"catalyst.scripts", "list of strings"});
  expect_error(kValid + "catalyst: {scripts: [view.txt]}\n",
               {"catalyst.scripts", "not a Catalyst script"});
  expect_error(kValid + "catalyst: {script: [a.py]}\n",
               {"unknown key 'catalyst.script'", "did you mean 'scripts'"});
}

// A repeated key (the first value would win without a word), a key that is a list, and a case
// file too large to be a run's description are refused with where and why (issue 19).
TEST(Config, DuplicateComplexAndOversizedInput) {
  expect_error(replace(kValid, "  spacing: 0.02\n", "  spacing: 0.02\n  spacing: 100\n"),
               {"case.yaml:6:3:", "key 'sph.spacing' is given twice (lines 5 and 6)"});
  expect_error(kValid + "time: {end: 1}\n", {"key 'time' is given twice"});
  expect_error(kValid + "? [a, b]\n: 1\n", {"case.yaml:12:", "keys are plain names"});
  std::string big = kValid + "name: x";
  big += "\n#" + std::string(1 << 20, 'x') + "\n";
  expect_error(big, {"case.yaml", "limited to 1024 KiB"});
}

// decomposition.dims beyond an int converted with undefined behaviour (found by
// tests/fuzz/fuzz_case_yaml); their product is a rank count and must fit one too.
TEST(Config, DecompositionDimsOutOfRange) {
  expect_error(kValid, {"key 'decomposition.dims'", "non-negative integers"},
               {"decomposition.dims=[7e120, 1, 1]"});
  expect_error(kValid, {"key 'decomposition.dims'", "finite"}, {"decomposition.dims=[.inf, 1, 1]"});
  expect_error(kValid, {"key 'decomposition.dims'", "product (the rank count) is too large"},
               {"decomposition.dims=[65536, 65536, 0]"});
  EXPECT_EQ(error_of(kValid, {"decomposition.dims=[4, 1, 1]"}), "");
}

// An alias inside its own anchor makes a cyclic YAML graph that yaml-cpp accepts; walking it ran
// out of memory (found by tests/fuzz/fuzz_case_yaml). Refused, in the file and in --set values,
// as are duplicate keys in --set values; aliases that only reuse a value still work.
TEST(Config, CyclicAliasesAndOverrideValues) {
  expect_error(
      kValid + "output: &o {dir: x, more: *o}\n",
      {"case.yaml", "key 'output.more.more", "levels deep", "alias inside its own anchor"});
  expect_error(kValid + "output: &o [*o]\n", {"levels deep"});
  expect_error(kValid, {"levels deep"}, {"output.dir=&o {a: *o}"});
  expect_error(kValid, {"key 'sph.spacing' is given twice"}, {"sph={spacing: 1, spacing: 2}"});
  const std::string reuse = replace(kValid, "  spacing: 0.02\n", "  spacing: &s 0.02\n");
  EXPECT_EQ(error_of(replace(reuse, "  end: 0.1\n", "  end: *s\n")), "");
}

// The workload is named in every case; the message lists those this build has.
TEST(Config, WorkloadIsRequiredAndChecked) {
  expect_error(replace(kValid, "workload: sph\n", ""), {"key 'workload'", "is required"});
  expect_error(replace(kValid, "workload: sph\n", "workload: fem\n"),
               {"key 'workload'", "'fem' is not one of", "meshdist", "sph"});
  // A section another workload takes is an unknown key here.
  expect_error(kValid + "meshdist: {}\n", {"unknown key 'meshdist'"});
}

// Geometry that cannot be run: overlapping fluid blocks, fluid inside a solid, a spacing that
// overflows the particle count, a box whose extent overflows (issue 19's reproducers).
TEST(Config, GeometryThatCannotBeRun) {
  expect_error(replace(kValid, "  - {lo: [0, 0, 0], hi: [0.2, 0.1, 0.4]}\n",
                       "  - {lo: [0, 0, 0], hi: [0.2, 0.1, 0.4]}\n"
                       "  - {lo: [0.1, 0, 0], hi: [0.3, 0.1, 0.4]}\n"),
               {"key 'fluid'", "blocks 0", "and 1", "overlap"});
  // Blocks that only touch are fine.
  EXPECT_NO_THROW(parse_case_text("case.yaml",
                                  replace(kValid, "  - {lo: [0, 0, 0], hi: [0.2, 0.1, 0.4]}\n",
                                          "  - {lo: [0, 0, 0], hi: [0.2, 0.1, 0.4]}\n"
                                          "  - {lo: [0.2, 0, 0], hi: [0.3, 0.1, 0.4]}\n"),
                                  {}));
  expect_error(kValid, {"solids[0]", "overlaps fluid block 0", "inside a solid"},
               {"boundary.solids=[{lo: [0, 0, 0], hi: [0.2, 0.1, 0.4]}]"});
  expect_error(kValid, {"key 'sph'", "spacing gives", "fluid particles", "increase it"},
               {"sph.spacing=1e-300"});
  expect_error(kValid, {"key 'domain.hi'", "extent overflows"},
               {"domain.lo=[-1.7e308, -0.1, -0.1]", "domain.hi=[1.7e308, 0.2, 1]"});
}

// output.dir is a folder the run can make: not empty, not a file, no name over 255 bytes, no NUL
// (a YAML escape); a domain whose cell grid would overflow its 32-bit indices is refused with
// the key.
TEST(Config, OutputDirAndCellGrid) {
  expect_error(kValid, {"key 'output.dir'", "must name a folder"}, {"output.dir=''"});
  expect_error(kValid, {"key 'output.dir'", "exists and is not a folder"},
               {"output.dir=/dev/null"});
  expect_error(kValid, {"key 'output.dir'", "longer than 255 bytes"},
               {"output.dir=out/" + std::string(300, 'x')});
  expect_error(kValid, {"key 'output.dir'", "holds a NUL character"}, {"output.dir=\"out/a\\0b\""});
  expect_error(kValid, {"key 'domain'", "cell grid of", "shrink the domain"},
               {"domain.lo=[-1e6, -1e6, -1e6]", "domain.hi=[1e6, 1e6, 1e6]"});
}

}  // namespace
}  // namespace apron::config
