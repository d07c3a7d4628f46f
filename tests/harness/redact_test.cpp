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

// Options whose last word only ends with a secret word, or begins with one (as environment
// names are judged), with counts and paths still left alone.
TEST(Redact, SecretOptionsByTheSameWordRuleAsNames) {
  for (const char* option :
       {"--apikey", "--auth-token", "--access-token", "--hf-token", "--openai-api-key", "--openai-apikey", "--hftoken", "--authtoken",
        "--authorization", "--client-secret", "--db-password", "--api-keys", "--apikeys", "-apikey", "--APIKEY=x", "--secret-access-key"}) {
    EXPECT_TRUE(IsSecretOption(option)) << option;
  }
  for (const char* option : {"--max-tokens", "--tokens", "--keys", "--num-keys", "--max-new-tokens", "--prompt-tokens", "--api-key-file",
                             "--apikey-file", "--hf-token-path", "--secrets-dir", "--tokenizer", "--tokenizer-json", "--keyboard",
                             "--allow-unauthenticated", "--ssl-keyfile", "--author-name"}) {
    EXPECT_FALSE(IsSecretOption(option)) << option;
  }
  EXPECT_EQ(RedactArgs({"--apikey", "s3cr3t", "--max-tokens", "16", "--openai-apikey=k3y"}),
            (std::vector<std::string>{"--apikey", "<redacted>", "--max-tokens", "16", "--openai-apikey=<redacted>"}));
  EXPECT_EQ(RedactShellCommand("srv --auth-token s3cr3t --tokens 8"), "srv --auth-token <redacted> --tokens 8");
}

// Container run arguments pass environment assignments inside an option word too:
// `--env=NAME=V`, `-eNAME=V`, and as one word `-e NAME=V` / `--env NAME=V`.
TEST(Redact, EnvironmentAssignmentsInsideAnOptionWord) {
  const std::vector<std::string> args = {
      "--env=HF_TOKEN=a1", "-eHF_TOKEN=b2",  "-e HF_TOKEN=c3",       "--env HF_TOKEN=d4",          "-e",
      "HF_TOKEN=e5",       "--env",          "HF_TOKEN=f6",          "--env=OMP_NUM_THREADS=1",    "-eLANG=C",
      "-e PATH=/bin",      "--env=HF_TOKEN", "-eSECRETS_DIR=/run/s", "--build-arg=GITHUB_TOKEN=g7"};
  const std::vector<std::string> want = {"--env=HF_TOKEN=<redacted>",
                                         "-eHF_TOKEN=<redacted>",
                                         "-e HF_TOKEN=<redacted>",
                                         "--env HF_TOKEN=<redacted>",
                                         "-e",
                                         "HF_TOKEN=<redacted>",
                                         "--env",
                                         "HF_TOKEN=<redacted>",
                                         "--env=OMP_NUM_THREADS=1",
                                         "-eLANG=C",
                                         "-e PATH=/bin",
                                         "--env=HF_TOKEN",
                                         "-eSECRETS_DIR=<redacted>",
                                         "--build-arg=GITHUB_TOKEN=<redacted>"};
  EXPECT_EQ(RedactArgs(args), want);
  EXPECT_EQ(SecretValuesOfArgs(args), (std::vector<std::string>{"a1", "b2", "c3", "d4", "e5", "f6", "/run/s", "g7"}));
  EXPECT_EQ(RedactShellCommand("docker run --env=HF_TOKEN='a b' -eAPI_KEY=\"q\" -e OMP_NUM_THREADS=1 img"),
            "docker run --env=HF_TOKEN=<redacted> -eAPI_KEY=<redacted> -e OMP_NUM_THREADS=1 img");
  EXPECT_EQ(SecretValuesOfShellCommand("docker run --env=HF_TOKEN='a b' -eAPI_KEY=k1 img"), (std::vector<std::string>{"a b", "k1"}));
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

// A secret written twice was redacted once (the dry run, the store and the report showed
// the second), and a stored, redacted command redacted again read "<<redacted>>".
TEST(Redact, EveryCopyOfASecretGoesAndRedactingTwiceChangesNothing) {
  const std::string once = RedactShellCommand("srv --api-key S3CRETVALUE --header 'Authorization: Bearer S3CRETVALUE' # {port}");
  EXPECT_EQ(once, "srv --api-key <redacted> --header 'Authorization: Bearer <redacted>' # {port}");
  EXPECT_EQ(RedactShellCommand(once), once);
  EXPECT_EQ(RedactShellCommand("srv --api-key=S3CRETVALUE --again S3CRETVALUE"), "srv --api-key=<redacted> --again <redacted>");
  EXPECT_EQ(RedactShellCommand("srv --api-key=<redacted> --x 1"), "srv --api-key=<redacted> --x 1");
  EXPECT_EQ(RedactShellCommand("srv --api-key <redacted> --x 1"), "srv --api-key <redacted> --x 1");
}

TEST(Redact, ScrubbingFreeText) {
  const std::vector<std::string> secrets = {"s3cr3t", "s3cr3t-longer", "true", "1", "a\"b\\c"};
  EXPECT_EQ(ScrubSecrets("key s3cr3t-longer and s3cr3t; flag true 1", secrets), "key <redacted> and <redacted>; flag true 1");
  EXPECT_EQ(ScrubSecrets(R"({"v": "a\"b\\c"} and a"b\c)", secrets), R"({"v": "<redacted>"} and <redacted>)");
  EXPECT_EQ(ScrubSecrets("nothing here", {}), "nothing here");
}

}  // namespace
}  // namespace tandem
