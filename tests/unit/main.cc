// The unit tests' main: GoogleTest's, plus one line per case for scripts/run-tests.sh.
//
// CTest runs the unit tests as a few processes (shards), not one process per case: starting the
// ASan build's binary ~1,300 times cost ~10 minutes of CI. So that every case still counts on its
// own in "N passed, N failed, N skipped", each shard writes "status<TAB>Suite.Case<TAB>reason" to
// $PEREGRINE_TEST_RESULTS/$PEREGRINE_CTEST_NAME.tsv, the file the integration harness writes
// (tests/integration/harness.py write_outcomes); scripts/ctest-summary.py reads both.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  return text;
}

class OutcomeFile : public testing::EmptyTestEventListener {
 public:
  explicit OutcomeFile(std::string path) : path_(std::move(path)) {}

  void OnTestEnd(const testing::TestInfo& info) override {
    const testing::TestResult& result = *info.result();
    const char* status = result.Skipped() ? "skipped" : result.Passed() ? "passed" : "failed";
    std::string reason;
    for (int i = 0; i < result.total_part_count() && reason.empty(); ++i) {
      const testing::TestPartResult& part = result.GetTestPartResult(i);
      if (part.skipped() || part.failed()) reason = part.message();
    }
    lines_ += std::string(status) + '\t' + info.test_suite_name() + '.' + info.name() + '\t' +
              one_line(reason) + '\n';
  }

  // Written whole at the end, then renamed: a shard that crashed leaves no file, and the runner
  // counts its CTest test as failed rather than a partial list as the truth.
  void OnTestProgramEnd(const testing::UnitTest&) override {
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << lines_;
    std::rename(tmp.c_str(), path_.c_str());
  }

 private:
  std::string path_;
  std::string lines_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const char* dir = std::getenv("PEREGRINE_TEST_RESULTS");
  const char* name = std::getenv("PEREGRINE_CTEST_NAME");
  if (dir && *dir && name && *name)
    testing::UnitTest::GetInstance()->listeners().Append(
        new OutcomeFile(std::string(dir) + '/' + name + ".tsv"));
  return RUN_ALL_TESTS();
}
