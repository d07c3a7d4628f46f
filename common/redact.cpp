#include "common/redact.hpp"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <optional>

namespace tandem {

namespace {

std::string Upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.substr(s.size() - p.size()) == p; }

// The words of a name, split at anything not a letter or digit, upper-cased.
std::vector<std::string> Words(std::string_view name) {
  std::vector<std::string> words;
  std::string word;
  for (const char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

constexpr std::string_view kSecretWords[] = {"KEY",      "KEYS",      "TOKEN",  "TOKENS",     "SECRET",      "SECRETS",
                                             "PASSWORD", "PASSWORDS", "PASSWD", "CREDENTIAL", "CREDENTIALS", "AUTH"};
// Beginnings that are secret on their own (AUTHORIZATION, SECRETS, PASSWORDFILE is a
// stretch but harmless). KEY and TOKEN are not among them: KEYBOARD, TOKENIZERS.
constexpr std::string_view kSecretStarts[] = {"SECRET", "PASSW", "CREDENTIAL", "AUTH"};

// A word of a name (upper-cased) that makes it secret: it is or ends with one of
// kSecretWords (OPENAI_APIKEY), or begins with one of kSecretStarts.
bool IsSecretWord(std::string_view word) {
  for (const std::string_view secret : kSecretWords) {
    if (EndsWith(word, secret)) return true;
  }
  for (const std::string_view start : kSecretStarts) {
    if (StartsWith(word, start)) return true;
  }
  return false;
}

// The last word of an option that counts keys or tokens (--max-tokens, --num-keys,
// --tokens, --maxtokens), unlike a list of them: KEYS or TOKENS, on its own or at the end
// of the word, after anything but API, ACCESS, AUTH or SECRET (--api-keys, --apikeys,
// --access-tokens hold secrets). `before` is the word before it.
bool IsCountWord(std::string_view word, std::string_view before) {
  for (const std::string_view plural : {std::string_view("KEYS"), std::string_view("TOKENS")}) {
    if (!EndsWith(word, plural)) continue;
    const std::string_view qualifier = word.size() > plural.size() ? word.substr(0, word.size() - plural.size()) : before;
    return qualifier != "API" && qualifier != "ACCESS" && qualifier != "AUTH" && qualifier != "SECRET";
  }
  return false;
}

// A shell-style NAME (what `env NAME=V` and `-e NAME=V` take).
bool IsEnvName(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// Where the value of `text` starts when it is an assignment NAME=V with a secret NAME.
std::optional<std::size_t> SecretAssignmentValue(std::string_view text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string_view::npos) return std::nullopt;
  const std::string_view name = text.substr(0, eq);
  if (!IsEnvName(name) || !IsSecretName(name)) return std::nullopt;
  return eq + 1;
}

// Where the secret of one word starts, given the word before it: nullopt when the word
// holds none, 0 when all of it is secret, k when its characters from k on are
// (`--api-key=V`, `NAME=V`, or one word "--api-key V").
std::optional<std::size_t> SecretStart(std::string_view word, std::string_view previous, bool previous_was_value) {
  if (!previous_was_value && StartsWith(previous, "-") && previous.find_first_of("= ") == std::string_view::npos &&
      IsSecretOption(previous)) {
    return 0;
  }
  const std::size_t cut = word.find_first_of("= ");
  if (!StartsWith(word, "-")) {
    if (cut == std::string_view::npos || word[cut] != '=') return std::nullopt;
    return SecretAssignmentValue(word);
  }
  // An option with its value in the word: `--api-key=V`, or one word "--api-key V".
  if (cut != std::string_view::npos && IsSecretOption(word.substr(0, cut))) return cut + 1;
  // An environment assignment inside an option word (container run arguments):
  // `--env=NAME=V`, "--env NAME=V", "-e NAME=V", and after a short option's letter,
  // `-eNAME=V`.
  if (cut != std::string_view::npos) {
    const std::size_t from = word.find_first_not_of(' ', cut + 1);
    if (from != std::string_view::npos) {
      if (const auto value = SecretAssignmentValue(word.substr(from))) return from + *value;
    }
  }
  if (word.size() > 2 && std::isalpha(static_cast<unsigned char>(word[1]))) {
    if (const auto value = SecretAssignmentValue(word.substr(2))) return 2 + *value;
  }
  return std::nullopt;
}

// For each word, where its secret starts (see SecretStart).
std::vector<std::optional<std::size_t>> SecretStarts(const std::vector<std::string>& words) {
  std::vector<std::optional<std::size_t>> out(words.size());
  for (std::size_t i = 0; i < words.size(); ++i) {
    // A secret option's value is never itself taken for an option: `--token --token`
    // redacts the second word and nothing after it.
    out[i] = SecretStart(words[i], i == 0 ? std::string_view() : std::string_view(words[i - 1]), i > 0 && out[i - 1] == 0u);
  }
  return out;
}

// A word of a shell command line: where it stands in the text and what sh makes of it.
struct ShellWord {
  std::size_t begin = 0, end = 0;
  std::string value;             // quotes removed, escapes resolved
  std::vector<std::size_t> map;  // for each character of value, its offset in the text
};

// Splits a command line as sh would into words (quotes, backslashes; ; | & < > ( ) end a
// word). Expansions are left as written: what matters here is where words begin and end.
std::vector<ShellWord> ShellWords(std::string_view text) {
  std::vector<ShellWord> words;
  std::size_t i = 0;
  const auto separator = [](char c) {
    return std::isspace(static_cast<unsigned char>(c)) || std::string_view(";|&<>()").find(c) != std::string_view::npos;
  };
  while (i < text.size()) {
    if (separator(text[i])) {
      ++i;
      continue;
    }
    ShellWord w;
    w.begin = i;
    while (i < text.size() && !separator(text[i])) {
      const char c = text[i];
      if (c == '\'') {
        for (++i; i < text.size() && text[i] != '\''; ++i) {
          w.value += text[i];
          w.map.push_back(i);
        }
        ++i;
      } else if (c == '"') {
        for (++i; i < text.size() && text[i] != '"'; ++i) {
          if (text[i] == '\\' && i + 1 < text.size() && std::string_view("\"\\$`").find(text[i + 1]) != std::string_view::npos) ++i;
          w.value += text[i];
          w.map.push_back(i);
        }
        ++i;
      } else if (c == '\\' && i + 1 < text.size()) {
        w.value += text[i + 1];
        w.map.push_back(i + 1);
        i += 2;
      } else {
        w.value += c;
        w.map.push_back(i);
        ++i;
      }
    }
    w.end = std::min(i, text.size());
    words.push_back(std::move(w));
  }
  return words;
}

bool TooCommonToScrub(std::string_view value) {
  if (value.size() < 4) return true;
  const std::string upper = Upper(value);
  if (upper == "TRUE" || upper == "FALSE" || upper == "YES" || upper == "NO" || upper == "NONE" || upper == "NULL") return true;
  return std::all_of(value.begin(), value.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' || c == 'e'; });
}

// `value` as it appears inside a JSON string.
std::string JsonEscaped(std::string_view value) {
  std::string out;
  for (const char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void ReplaceAll(std::string& text, std::string_view what) {
  if (what.empty()) return;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + kRedacted.size())) {
    text.replace(at, what.size(), kRedacted);
  }
}

}  // namespace

bool IsSecretName(std::string_view name) {
  const std::vector<std::string> words = Words(name);
  return std::any_of(words.begin(), words.end(), [](const std::string& word) { return IsSecretWord(word); });
}

bool IsSecretOption(std::string_view option) {
  if (!StartsWith(option, "-")) return false;
  option = option.substr(0, option.find_first_of("= "));
  const std::vector<std::string> words = Words(option);
  if (words.empty()) return false;
  const std::string& last = words.back();
  // A path is not secret: --api-key-file, --hf-token-path, --secrets-dir.
  if (last == "FILE" || last == "FILES" || last == "PATH" || last == "DIR") return false;
  if (IsCountWord(last, words.size() > 1 ? std::string_view(words[words.size() - 2]) : std::string_view())) return false;
  return IsSecretWord(last);
}

std::vector<std::string> RedactArgs(const std::vector<std::string>& args) {
  std::vector<std::string> out = args;
  const auto starts = SecretStarts(args);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (starts[i]) out[i] = out[i].substr(0, *starts[i]) + std::string(kRedacted);
  }
  return out;
}

std::vector<std::string> SecretValuesOfArgs(const std::vector<std::string>& args) {
  std::vector<std::string> values;
  const auto starts = SecretStarts(args);
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (starts[i]) values.push_back(args[i].substr(*starts[i]));
  }
  return values;
}

std::map<std::string, std::string> RedactEnv(const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> out = env;
  for (auto& [name, value] : out) {
    if (IsSecretName(name)) value = kRedacted;
  }
  return out;
}

std::vector<std::string> SecretValuesOfEnv(const std::map<std::string, std::string>& env) {
  std::vector<std::string> values;
  for (const auto& [name, value] : env) {
    if (IsSecretName(name)) values.push_back(value);
  }
  return values;
}

std::string RedactShellCommand(std::string_view command) {
  // An earlier redaction's "<redacted>" is one word to sh's reading only once its '<' and
  // '>' (redirections) are out of the way: it stands in as a plain word, and comes back.
  constexpr std::string_view kPlaceholder = "\x1fREDACTED\x1f";
  std::string text(command);
  for (std::size_t at; (at = text.find(kRedacted)) != std::string::npos;) text.replace(at, kRedacted.size(), kPlaceholder);
  const std::vector<ShellWord> words = ShellWords(text);
  std::vector<std::string> values;
  for (const ShellWord& w : words) values.push_back(w.value);
  const auto starts = SecretStarts(values);
  std::string out = text;
  // From the last word back, so that earlier offsets stay valid.
  for (std::size_t i = words.size(); i-- > 0;) {
    if (!starts[i]) continue;
    const ShellWord& w = words[i];
    // A value after '=' is replaced from just after the '=' in the text, its quotes with it.
    const std::size_t from = *starts[i] == 0 ? w.begin : w.map[*starts[i] - 1] + 1;
    out.replace(from, w.end - from, kPlaceholder);
  }
  // The same secret elsewhere in the line (a header, a second flag, a comment) goes too.
  out = ScrubSecrets(out, SecretValuesOfArgs(values));
  for (std::size_t at; (at = out.find(kPlaceholder)) != std::string::npos;) out.replace(at, kPlaceholder.size(), kRedacted);
  return out;
}

std::vector<std::string> SecretValuesOfShellCommand(std::string_view command) {
  std::vector<std::string> values;
  for (const ShellWord& w : ShellWords(command)) values.push_back(w.value);
  return SecretValuesOfArgs(values);
}

std::string ScrubSecrets(std::string_view text, const std::vector<std::string>& values) {
  std::vector<std::string> sorted;
  for (const std::string& v : values) {
    if (!TooCommonToScrub(v)) sorted.push_back(v);
  }
  std::sort(sorted.begin(), sorted.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  std::string out(text);
  for (const std::string& v : sorted) {
    ReplaceAll(out, v);
    ReplaceAll(out, JsonEscaped(v));
  }
  return out;
}

}  // namespace tandem
