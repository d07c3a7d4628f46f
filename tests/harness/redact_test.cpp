// What is secret in a campaign (common/redact.hpp): environment names, options, shell
// command lines, and the scrubbing of known values from free text.
#include "common/redact.hpp"

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(Redact, SecretEnvironmentNames) {
  for (const char* name : {"HF_TOKEN", "hf_token", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY", "OPENAI_APIKEY", "DB_PASSWORD", "PGPASSWD",
                           "GOOGLE_APPLICATION_CREDENTIALS", "AUTH", "BASIC_AUTH_USER", "AUTHORIZATION", "TANDEM_WORKER_TOKEN",
                           "GITHUB_TOKEN", "MY-SECRET", "SECRETS_DIR", "API_KEYS"}) {
    EXPECT_TRUE(IsSecretName(name)) << name;
  }
  for (const char* name : {"OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM", "KEYBOARD", "PATH", "HOME", "CUDA_VISIBLE_DEVICES", "LANG"}) {
    EXPECT_FALSE(IsSecretName(name)) << name;
  }
}

TEST(Redact, SecretOptions) {
  for (const char* option : {"--api-key", "--api_key", "--token", "--password", "--passwd", "--worker-token", "--hf-token", "--auth",
                             "--secret", "--api-key=x", "-api-key"}) {
    EXPECT_TRUE(IsSecretOption(option)) << option;
  }
  for (const char* option : {"--api-key-file", "--worker-token-file", "--max-tokens", "--max-output-tokens", "--top-k", "--threads",
                             "api-key", "--keyboard", "--tokenizer-source"}) {
    EXPECT_FALSE(IsSecretOption(option)) << option;
  }
}

TEST(Redact, ArgumentsKeepTheirShapeWithTheValuesReplaced) {
  const std::vector<std::string> args = {
      "--threads",      "2",        "--api-key",    "s3cr3t", "--token=t0ken", "-e",       "HF_TOKEN=hf", "-e", "OMP_NUM_THREADS=1",
      "--api-key-file", "/run/key", "--max-tokens", "16",     "--password s3", "--api-key"};
  const std::vector<std::string> want = {"--threads",
                                         "2",
                                         "--api-key",
                                         "<redacted>",
                                         "--token=<redacted>",
                                         "-e",
                                         "HF_TOKEN=<redacted>",
                                         "-e",
                                         "OMP_NUM_THREADS=1",
                                         "--api-key-file",
                                         "/run/key",
                                         "--max-tokens",
                                         "16",
                                         "--password <redacted>",
                                         "--api-key"};
  EXPECT_EQ(RedactArgs(args), want);
  EXPECT_EQ(SecretValuesOfArgs(args), (std::vector<std::string>{"s3cr3t", "t0ken", "hf", "s3"}));
  // A secret option's value is never taken for an option itself.
  EXPECT_EQ(RedactArgs({"--token", "--token", "x"}), (std::vector<std::string>{"--token", "<redacted>", "x"}));
}

TEST(Redact, Environment) {
  const std::map<std::string, std::string> env = {{"HF_TOKEN", "s3cr3t"}, {"OMP_NUM_THREADS", "1"}};
  EXPECT_EQ(RedactEnv(env), (std::map<std::string, std::string>{{"HF_TOKEN", "<redacted>"}, {"OMP_NUM_THREADS", "1"}}));
  EXPECT_EQ(SecretValuesOfEnv(env), (std::vector<std::string>{"s3cr3t"}));
}

TEST(Redact, ShellCommandLinesKeepTheirQuotingAndEverythingElse) {
  EXPECT_EQ(RedactShellCommand("tandem-rt serve --listen 127.0.0.1:{port} --api-key s3cr3t --threads 1"),
            "tandem-rt serve --listen 127.0.0.1:{port} --api-key <redacted> --threads 1");
  EXPECT_EQ(RedactShellCommand("HF_TOKEN='a b' vllm serve --api-key=\"x y\" --port {port}; echo done"),
            "HF_TOKEN=<redacted> vllm serve --api-key=<redacted> --port {port}; echo done");
  EXPECT_EQ(RedactShellCommand("srv --token 'it'\\''s' --other"), "srv --token <redacted> --other");
  EXPECT_EQ(SecretValuesOfShellCommand("srv --token 'it'\\''s' HF_TOKEN=\"q\" --api-key=k1"),
            (std::vector<std::string>{"it's", "q", "k1"}));
  EXPECT_EQ(RedactShellCommand("srv --threads 2"), "srv --threads 2");
}

TEST(Redact, ScrubbingFreeText) {
  const std::vector<std::string> secrets = {"s3cr3t", "s3cr3t-longer", "true", "1", "a\"b\\c"};
  EXPECT_EQ(ScrubSecrets("key s3cr3t-longer and s3cr3t; flag true 1", secrets), "key <redacted> and <redacted>; flag true 1");
  EXPECT_EQ(ScrubSecrets(R"({"v": "a\"b\\c"} and a"b\c)", secrets), R"({"v": "<redacted>"} and <redacted>)");
  EXPECT_EQ(ScrubSecrets("nothing here", {}), "nothing here");
}

}  // namespace
}  // namespace tandem
