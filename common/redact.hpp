#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

// What of a campaign is secret, stated once: every place that stores or prints an arm's
// options, environment or command line (the store, `--dry-run`, the report, `tandem
// show`, failure reasons) goes through these functions, and the real values still go to
// the processes. Docs: docs/campaign-yaml.md#secrets.
namespace tandem {

// What a secret is replaced by.
inline constexpr std::string_view kRedacted = "<redacted>";

// An environment variable whose value is secret, by its name (case-insensitive): a word of
// the name (split at '_' and other non-alphanumerics) that is or ends with KEY, TOKEN,
// SECRET, PASSWORD, PASSWD, CREDENTIAL or AUTH (or their plurals), or begins with SECRET,
// PASSW, CREDENTIAL or AUTH: HF_TOKEN, AWS_SECRET_ACCESS_KEY, OPENAI_APIKEY, DB_PASSWORD.
// TOKENIZERS_PARALLELISM and KEYBOARD are not secret.
bool IsSecretName(std::string_view name);

// An option whose value is secret: `--api-key`, `--apikey`, `--token`, `--auth-token`,
// `--password`, `--worker-token`, `--authorization`, ... — its last word (split at '-' and
// '_') is secret as a word of a name is (IsSecretName). But a path is not: the last word
// FILE, FILES, PATH or DIR (`--api-key-file`); nor a count: KEYS or TOKENS on their own or
// after anything but API, ACCESS, AUTH or SECRET (`--max-tokens`, `--num-keys`, `--tokens`;
// `--api-keys` is secret). `--tokenizer` and `--keyboard` are not. `option` may carry its
// value (`--api-key=V`): only the name counts.
bool IsSecretOption(std::string_view option);

// Arguments with each secret value replaced: the word after a secret option
// (`--api-key V`), the value of `--api-key=V`, and of `NAME=V` where NAME is secret (an
// `env` or `-e` argument), also inside an option word: `--env=NAME=V`, `-eNAME=V`, and
// `-e NAME=V` or `--env NAME=V` written as one word.
std::vector<std::string> RedactArgs(const std::vector<std::string>& args);

// An environment with the values of secret names replaced.
std::map<std::string, std::string> RedactEnv(const std::map<std::string, std::string>& env);

// A shell command line (a command arm's template) with the same words replaced as
// RedactArgs would (words split as sh splits them, quotes kept whole).
std::string RedactShellCommand(std::string_view command);

// The secret values RedactArgs / RedactEnv / RedactShellCommand would replace, for
// scrubbing them from free text (messages, reasons, another program's output).
std::vector<std::string> SecretValuesOfArgs(const std::vector<std::string>& args);
std::vector<std::string> SecretValuesOfEnv(const std::map<std::string, std::string>& env);
std::vector<std::string> SecretValuesOfShellCommand(std::string_view command);

// `text` with every occurrence of each value (raw, and as a JSON string escapes it)
// replaced by kRedacted, longest first. Values too common to be scrubbed from prose
// without blanking it — shorter than 4 characters, numbers, true/false/yes/no — are left:
// they are still replaced wherever they stand as values (the functions above).
std::string ScrubSecrets(std::string_view text, const std::vector<std::string>& values);

}  // namespace tandem
