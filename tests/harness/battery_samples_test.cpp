#include "harness/traffic/battery_samples.hpp"

#include <filesystem>

#include <gtest/gtest.h>

#include "common/input_error.hpp"

namespace tandem::harness {
namespace {

std::string ErrorOf(std::string_view text) {
  try {
    ParseBatterySamples(text, "s.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(BatterySamples, ParsesEveryField) {
  const auto samples = ParseBatterySamples(
      R"([{"case":"code","weight":2,"completion_tokens":512,"t_first_output":0.4,"t_finish":5.5,"repeat":3},
          {"case":"topic","weight":0.5,"completion_tokens":1,"t_first_output":1,"t_finish":1}])",
      "s.json");
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].repeat, 3);
  EXPECT_EQ(samples[0].request.case_name, "code");
  EXPECT_EQ(samples[0].request.weight, 2.0);
  EXPECT_EQ(samples[0].request.timing.completion_tokens, 512);
  EXPECT_EQ(samples[0].request.timing.t_first_output, 0.4);
  EXPECT_EQ(samples[0].request.timing.t_finish, 5.5);
  EXPECT_EQ(samples[1].repeat, 0) << "repeat defaults to 0";
  EXPECT_EQ(samples[1].request.weight, 0.5);
}

TEST(BatterySamples, ErrorsNameTheSourceSampleAndKey) {
  const std::string ok = R"("case":"a","weight":1,"completion_tokens":5,"t_first_output":0,"t_finish":1)";
  EXPECT_EQ(ErrorOf("{}"), "s.json: expected a JSON array of samples, got object");
  EXPECT_EQ(ErrorOf("[]"), "s.json: the sample array is empty");
  EXPECT_EQ(ErrorOf("[1]"), "s.json: sample 0 must be an object, got number");
  EXPECT_EQ(ErrorOf("[{" + ok + "},{" + ok + R"(,"t_finsh":3})" + "]"),
            "s.json: sample 1: unknown key 't_finsh' (known: case, weight, completion_tokens, "
            "t_first_output, t_finish, repeat)");
  EXPECT_EQ(ErrorOf(R"([{"weight":1,"completion_tokens":5,"t_first_output":0,"t_finish":1}])"), "s.json: sample 0: 'case' is missing");
  EXPECT_EQ(ErrorOf(R"([{"case":"","weight":1,"completion_tokens":5,"t_first_output":0,"t_finish":1}])"),
            "s.json: sample 0: 'case' must be a non-empty string");
  EXPECT_EQ(ErrorOf(R"([{"case":"a","weight":"2","completion_tokens":5,"t_first_output":0,"t_finish":1}])"),
            "s.json: sample 0: 'weight' must be a number, got \"2\"");
  EXPECT_EQ(ErrorOf(R"([{"case":"a","weight":-1,"completion_tokens":5,"t_first_output":0,"t_finish":1}])"),
            "s.json: sample 0: 'weight' must be positive, got -1");
  EXPECT_EQ(ErrorOf(R"([{"case":"a","weight":1,"completion_tokens":5.5,"t_first_output":0,"t_finish":1}])"),
            "s.json: sample 0: 'completion_tokens' must be an integer, got 5.5");
  EXPECT_EQ(ErrorOf(R"([{"case":"a","weight":1,"completion_tokens":0,"t_first_output":0,"t_finish":1}])"),
            "s.json: sample 0: 'completion_tokens' must be at least 1, got 0");
  EXPECT_EQ(ErrorOf(R"([{"case":"a","weight":1,"completion_tokens":18446744073709551615,"t_first_output":0,"t_finish":1}])"),
            "s.json: sample 0: 'completion_tokens' is too large: 18446744073709551615");
  EXPECT_EQ(ErrorOf(R"([{"case":"a","weight":1,"completion_tokens":5,"t_first_output":2,"t_finish":1}])"),
            "s.json: sample 0: 't_finish' (1) is before t_first_output (2)");
  EXPECT_EQ(ErrorOf("[{" + ok + R"(,"repeat":-1})" + "]"), "s.json: sample 0: 'repeat' must be at least 0, got -1");
  EXPECT_EQ(ErrorOf("[{" + ok + R"(},{"case":"a","weight":2,"completion_tokens":5,"t_first_output":0,"t_finish":1}])"),
            "s.json: sample 1: 'weight' is 2 but sample 0 gave case \"a\" weight 1; a case has one weight");
}

TEST(BatterySamples, MalformedJsonSaysWhere) {
  const std::string error = ErrorOf("[{\"case\": \"a\",\n  \"weight\": 1,,}]");
  EXPECT_NE(error.find("s.json: not valid JSON"), std::string::npos) << error;
  EXPECT_NE(error.find("line 2"), std::string::npos) << error;
}

TEST(BatterySamples, UnreadableFilesAreInputErrors) {
  EXPECT_THROW(ReadBatterySamples("/nonexistent/samples.json"), InputError);
  EXPECT_THROW(ReadBatterySamples(std::filesystem::temp_directory_path()), InputError);
}

}  // namespace
}  // namespace tandem::harness
