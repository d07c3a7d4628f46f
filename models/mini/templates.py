"""Instruction data from our own templates: each generator takes a random.Random and
returns one conversation, {"family", "system", "user", "reply", "think"} (think: the
reasoning of a thinking-mode reply, or None). The formats are those the release
battery checks (campaigns/corpus.yaml): counting one number per line, JSON objects
with the keys asked for, code with the function name the prompt gives, a final
"Answer:" line, one translation per line with the language name first, headings,
fables with a moral, short greetings. The wording is ours and varied; make_data.py
rejects any example that shares 40 characters with a corpus prompt."""

import json
import re

from tables import (BOOKS, CITIES, FABLE_CHARACTERS, FABLE_EVENTS, FABLE_FRIENDS, FABLE_HABITS, FABLE_PLACES, LANGUAGES,
                    SENTENCES, TOPICS)


# The share of city and function names made up from syllables (make_data.py sets it from
# data.invented_names_fraction; 0 draws nothing, so a config without it gives the same
# examples as before it existed). A made-up name can only be got right by copying it from
# the prompt: that is what teaches the model to read the prompt.
INVENTED = {"fraction": 0.0}
SYLLABLES = ["ka", "lo", "mi", "ve", "tor", "an", "bel", "ri", "sa", "dun", "el", "mar", "os", "pen", "ul", "zor", "fi",
             "gra", "hal", "ist", "jo", "nu", "quen", "ras", "sel", "tam", "vik", "wen", "yar", "bo", "cre", "dor"]


# Whole-word vocabulary tokens (make_data.py fills this from the tokenizer when a config asks
# for the "echo" family or data.vocabulary_names_fraction): text no template can predict, so
# only copying it from the prompt brings the loss down.
VOCABULARY = {"words": [], "names_fraction": 0.0}


def vocabulary_name(rng, words=2):
    return "".join(pick(rng, VOCABULARY["words"]).strip().capitalize() for _ in range(words))


def from_vocabulary(rng):
    """Whether a made-up name is made of vocabulary words rather than syllables."""
    return rng.random() < VOCABULARY["names_fraction"] if VOCABULARY["names_fraction"] > 0 else False


def invented(rng):
    return rng.random() < INVENTED["fraction"] if INVENTED["fraction"] > 0 else False


def made_up_word(rng, syllables=(2, 3)):
    return "".join(pick(rng, SYLLABLES) for _ in range(rng.randint(*syllables)))


def example(family, user, reply, system=None, think=None):
    return {"family": family, "system": system, "user": user, "reply": reply, "think": think}


def pick(rng, items):
    return items[rng.randrange(len(items))]


def num(x):
    """A number as people write it: at most two decimals, no trailing zeros."""
    if isinstance(x, int) or float(x).is_integer():
        return str(int(round(x)))
    return f"{x:.2f}".rstrip("0").rstrip(".")


def join_names(rng, names):
    """"a", "a and b", "a, b and c" (sometimes with the serial comma)."""
    if len(names) == 1:
        return names[0]
    last = ", and " if len(names) > 2 and rng.random() < 0.3 else " and "
    return ", ".join(names[:-1]) + last + names[-1]


GENERIC_SYSTEMS = [
    "You are a helpful assistant.", "You are a helpful, concise assistant.", "Answer clearly and briefly.",
    "You are a friendly assistant. Keep answers short.", "You are an assistant that follows instructions exactly.",
    "Be accurate and to the point.",
]


# ---------------------------------------------------------------------------
# Counting
# ---------------------------------------------------------------------------

COUNT_PROMPTS = [
    "Count from {a} to {b}, one number per line.",
    "Please count from {a} up to {b}. Put each number on its own line and write nothing else.",
    "List the integers from {a} to {b}, each on a separate line, with no other text.",
    "Write the numbers {a} through {b}, one per line.",
    "Count to {b}, starting at {a}. One number on each line, no words.",
    "Can you count from {a} to {b}? Only the numbers, one on each line.",
    "Output every whole number from {a} to {b} in order, one per line and nothing more.",
    "Count upward from {a} until you reach {b}. Each number goes on its own line.",
    "I need the numbers {a} to {b}, one per line, plain digits.",
    "Print the sequence {a}, {a1}, ..., {b}, with one number per line and no commentary.",
    "Count from {a} to {b}. Digits only, one number per line.",
]


def counting(rng):
    r = rng.random()
    if r < 0.45:
        b = rng.randint(150, 300)
    elif r < 0.8:
        b = rng.randint(20, 150)
    else:
        b = rng.randint(2, 20)
    a = 1 if rng.random() < 0.85 else rng.randint(2, max(2, b // 2))
    user = pick(rng, COUNT_PROMPTS).format(a=a, a1=a + 1, b=b)
    return example("counting", user, "\n".join(str(i) for i in range(a, b + 1)),
                   system=pick(rng, GENERIC_SYSTEMS) if rng.random() < 0.1 else None)


# ---------------------------------------------------------------------------
# JSON: cities and books
# ---------------------------------------------------------------------------

CITY_KEYS = {
    # key: (value from the row, type hints)
    "name": (lambda c: c[0], ["", "", "(a string)"]),
    "country": (lambda c: c[1], ["", "", "(a string)"]),
    "population": (lambda c: c[2], ["(a number)", "(an integer)", "(number)", ""]),
    "rivers": (lambda c: list(c[3]), ["(a list of strings)", "(an array of strings)", "(list)", ""]),
    "continent": (lambda c: c[4], ["", "(a string)"]),
    "language": (lambda c: c[5], ["", "(the main language)"]),
    "is_capital": (lambda c: c[6], ["(a boolean)", "(true or false)", ""]),
    "area_km2": (lambda c: c[7], ["(a number)", "(square kilometres)", ""]),
    "landmarks": (lambda c: list(c[8]), ["(a list of strings)", "(an array)", ""]),
}

JSON_CITY_PROMPTS = [
    "Give me a JSON object for {city} with the keys {keys}.",
    "Describe {city} as a JSON object using the keys {keys}. Reply with the JSON only.",
    "Output only JSON: an object about the city {city} with the fields {keys}.",
    "Produce a JSON object (no other text) for {city}; include the keys {keys}.",
    "I need {city} described in JSON. Use exactly these keys: {keys}.",
    "Write a JSON object with keys {keys} that describes {city}. No explanation, just JSON.",
    "Return JSON only. The object should describe {city} and contain {keys}.",
    "Create a JSON record for the city of {city} with {keys}.",
]


def quoted_keys(rng, keys, hints):
    parts = []
    for k in keys:
        hint = pick(rng, hints[k]) if hints else ""
        parts.append(f'"{k}"' + (f" {hint}" if hint else ""))
    return join_names(rng, parts)


def json_text(rng, obj, allow_fence=True):
    style = rng.random()
    if style < 0.6:
        return json.dumps(obj, ensure_ascii=False)
    if style < 0.9 or not allow_fence:
        return json.dumps(obj, ensure_ascii=False, indent=2)
    return "```json\n" + json.dumps(obj, ensure_ascii=False, indent=2) + "\n```"


def json_city(rng):
    c = pick(rng, CITIES) if rng.random() < 0.8 else pick(rng, [x for x in CITIES if x[1] == "France"])
    if invented(rng):
        c = (vocabulary_name(rng, 1) if from_vocabulary(rng) else made_up_word(rng).capitalize(),) + tuple(c[1:])
    keys = ["name", "country"]
    extra = [k for k in CITY_KEYS if k not in keys]
    rng.shuffle(extra)
    keys += extra[:rng.randint(1, 4)]
    if rng.random() < 0.5:
        rng.shuffle(keys)
    hints = {k: CITY_KEYS[k][1] for k in keys}
    user = pick(rng, JSON_CITY_PROMPTS).format(city=c[0], keys=quoted_keys(rng, keys, hints))
    obj = {k: CITY_KEYS[k][0](c) for k in keys}
    only = "only" in user.lower() or "no other" in user.lower() or "just json" in user.lower()
    return example("json_city", user, json_text(rng, obj, allow_fence=not only),
                   system=pick(rng, GENERIC_SYSTEMS) if rng.random() < 0.15 else None)


BOOK_FIELDS = {
    "title": ("string", lambda b, rng: b[0]),
    "author": ("string", lambda b, rng: b[1]),
    "year": ("integer", lambda b, rng: b[2]),
    "available": ("boolean", lambda b, rng: rng.random() < 0.6),
    "tags": ("[string]", lambda b, rng: b[3][:3]),
    "pages": ("integer", lambda b, rng: b[4]),
    "genre": ("string", lambda b, rng: b[5]),
    "language": ("string", lambda b, rng: b[6]),
    "rating": ("number", lambda b, rng: round(rng.uniform(3.4, 4.9), 1)),
    "copies": ("integer", lambda b, rng: rng.randint(0, 6)),
    "on_loan": ("boolean", lambda b, rng: rng.random() < 0.4),
}

JSON_BOOK_PROMPTS = [
    "Fill in this schema with a real book from a library catalogue: {schema}. Output the JSON and nothing else.",
    "Give a JSON object that follows the schema {schema} for a classic novel. Only JSON, please.",
    "Using the schema {schema}, write a JSON object describing a book a library might hold. No extra text.",
    "Create one catalogue entry as JSON matching {schema}. Reply with the object only.",
    "Here is a schema: {schema}. Produce a matching JSON object with plausible values for a well-known book.",
    "Return a JSON object for {title} that fits this schema: {schema}.",
    "Describe the book {title} as JSON with the structure {schema}. JSON only.",
]


def json_book(rng):
    b = pick(rng, BOOKS)
    keys = ["title", "author"] + [k for k in BOOK_FIELDS if k not in ("title", "author")]
    keys = keys[:2] + rng.sample(keys[2:], rng.randint(2, 5))
    if rng.random() < 0.7:
        rng.shuffle(keys)
    schema = "{" + ", ".join(f'"{k}": {BOOK_FIELDS[k][0]}' for k in keys) + "}"
    user = pick(rng, JSON_BOOK_PROMPTS).format(schema=schema, title=b[0])
    obj = {k: BOOK_FIELDS[k][1](b, rng) for k in keys}
    return example("json_book", user, json_text(rng, obj, allow_fence=False),
                   system=pick(rng, GENERIC_SYSTEMS) if rng.random() < 0.15 else None)


def facts(rng):
    """Short factual questions over the same tables (what JSON values should say)."""
    r = rng.random()
    if r < 0.4:
        c = pick(rng, CITIES)
        user = pick(rng, ["Which country is {0} in?", "In what country is {0}?", "{0} is a city in which country?",
                          "Where is {0}?"]).format(c[0])
        reply = pick(rng, ["{0} is in {1}.", "{0} is a city in {1}.", "{1}. {0} is in {2}."]).format(c[0], c[1], c[4])
    elif r < 0.6:
        c = pick(rng, CITIES)
        rivers = c[3]
        user = pick(rng, ["Which rivers flow through {0}?", "What river runs through {0}?", "Name the rivers of {0}."]).format(c[0])
        reply = (f"The {rivers[0]} flows through {c[0]}." if len(rivers) == 1 else
                 f"{c[0]} lies on the {' and the '.join(rivers)}.")
    elif r < 0.85:
        b = pick(rng, BOOKS)
        user = pick(rng, ["Who wrote {0}?", "Who is the author of {0}?", "When was {0} published, and by whom?"]).format(b[0])
        reply = f"{b[0]} was written by {b[1]} and published in {b[2]}."
    else:
        c = pick(rng, CITIES)
        user = pick(rng, ["About how many people live in {0}?", "What is the population of {0}?"]).format(c[0])
        reply = f"About {c[2]:,} people live in {c[0]} itself; the wider metropolitan area is larger."
    return example("facts", user, reply)


# ---------------------------------------------------------------------------
# Code: C++ and Python functions named in the prompt
# ---------------------------------------------------------------------------

def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


# Each kind: names, descriptions, C++ (includes, signature, body, tests), Python (signature, body, tests), explanation.
CODE_KINDS = [
    dict(names=["CountVowels", "TallyVowels", "VowelCount"],
         desc=["counts the vowels in a string", "returns how many vowels (a, e, i, o, u, either case) a text contains"],
         inc=["<cctype>", "<string_view>"], sig="int {n}(std::string_view text)",
         body="  int count = 0;\n  for (char c : text) {\n    switch (std::tolower(static_cast<unsigned char>(c))) {\n      case 'a': case 'e': case 'i': case 'o': case 'u':\n        ++count;\n        break;\n      default:\n        break;\n    }\n  }\n  return count;",
         tests=[("CountsMixedCase", '{n}("Hello World")', "3"), ("EmptyText", '{n}("")', "0"), ("NoVowels", '{n}("rhythm")', "0")],
         psig="{n}(text)", pbody="    return sum(1 for c in text.lower() if c in \"aeiou\")",
         ptests=[('{n}("Hello World")', "3"), ('{n}("")', "0")],
         explain="The function looks at each character once, lowers its case and checks it against the five vowels, so it runs in linear time and needs no extra memory."),
    dict(names=["ReverseString", "Reversed", "MirrorText"],
         desc=["returns the characters of a string in reverse order", "reverses a string"],
         inc=["<string>", "<string_view>"], sig="std::string {n}(std::string_view text)",
         body="  return std::string(text.rbegin(), text.rend());",
         tests=[("ReversesWord", '{n}("abc")', '"cba"'), ("EmptyStaysEmpty", '{n}("")', '""')],
         psig="{n}(text)", pbody="    return text[::-1]",
         ptests=[('{n}("abc")', '"cba"'), ('{n}("")', '""')],
         explain="Constructing a string from the reverse iterators copies the characters from last to first in a single pass."),
    dict(names=["IsPalindrome", "ReadsSameBackward", "CheckPalindrome"],
         desc=["tells whether a string reads the same forwards and backwards", "checks if a word is a palindrome"],
         inc=["<string_view>"], sig="bool {n}(std::string_view text)",
         body="  std::size_t i = 0, j = text.size();\n  while (i + 1 < j) {\n    if (text[i] != text[j - 1]) return false;\n    ++i;\n    --j;\n  }\n  return true;",
         tests=[("AcceptsPalindrome", '{n}("level")', "true"), ("RejectsOther", '{n}("lever")', "false"), ("EmptyIsPalindrome", '{n}("")', "true")],
         psig="{n}(text)", pbody="    return text == text[::-1]",
         ptests=[('{n}("level")', "True"), ('{n}("lever")', "False")],
         explain="Two indices walk toward each other from both ends; the first mismatch proves the text is not a palindrome, and meeting in the middle proves it is."),
    dict(names=["SumValues", "Total", "AddAll"],
         desc=["returns the sum of a list of integers", "adds up all numbers in a vector"],
         inc=["<cstdint>", "<vector>"], sig="std::int64_t {n}(const std::vector<int>& values)",
         body="  std::int64_t total = 0;\n  for (int v : values) total += v;\n  return total;",
         tests=[("AddsNumbers", "{n}({{1, 2, 3}})", "6"), ("EmptyIsZero", "{n}({{}})", "0")],
         psig="{n}(values)", pbody="    total = 0\n    for v in values:\n        total += v\n    return total",
         ptests=[("{n}([1, 2, 3])", "6"), ("{n}([])", "0")],
         explain="The sum is accumulated in a 64-bit integer so that long lists of large values do not overflow."),
    dict(names=["MaxElement", "Largest", "FindMaximum"],
         desc=["returns the largest value in a non-empty list", "finds the maximum of a list of numbers"],
         inc=["<stdexcept>", "<vector>"], sig="int {n}(const std::vector<int>& values)",
         body="  if (values.empty()) throw std::invalid_argument(\"empty input\");\n  int best = values[0];\n  for (int v : values) {\n    if (v > best) best = v;\n  }\n  return best;",
         tests=[("FindsMaximum", "{n}({{3, 9, 2}})", "9"), ("SingleValue", "{n}({{-4}})", "-4")],
         psig="{n}(values)", pbody="    if not values:\n        raise ValueError(\"empty input\")\n    best = values[0]\n    for v in values:\n        if v > best:\n            best = v\n    return best",
         ptests=[("{n}([3, 9, 2])", "9"), ("{n}([-4])", "-4")],
         explain="The first element is the starting candidate and every later element replaces it if larger; an empty input is an error rather than a made-up value."),
    dict(names=["SplitOn", "SplitByChar", "Tokenize"],
         desc=["splits a string on a separator character and keeps empty fields", "breaks text into fields at every occurrence of a delimiter"],
         inc=["<string>", "<string_view>", "<vector>"], sig="std::vector<std::string> {n}(std::string_view text, char sep)",
         body="  std::vector<std::string> parts;\n  std::size_t start = 0;\n  while (true) {\n    const std::size_t end = text.find(sep, start);\n    if (end == std::string_view::npos) {\n      parts.emplace_back(text.substr(start));\n      return parts;\n    }\n    parts.emplace_back(text.substr(start, end - start));\n    start = end + 1;\n  }",
         tests=[("SplitsFields", "{n}(\"a,b,,c\", ',').size()", "4u"), ("NoSeparator", "{n}(\"abc\", ',')[0]", '"abc"')],
         psig="{n}(text, sep)", pbody="    return text.split(sep)",
         ptests=[('{n}("a,b,,c", ",")', '["a", "b", "", "c"]'), ('{n}("abc", ",")', '["abc"]')],
         explain="Each field is copied once from the original view, from the last separator to the next one, so empty fields between two separators are kept."),
    dict(names=["BreakIntoLines", "LinesOf", "ToLines", "SplitText"],
         desc=["splits a text into lines, accepting both \\n and \\r\\n endings", "returns the lines of a text without their line endings"],
         inc=["<string>", "<string_view>", "<vector>"], sig="std::vector<std::string> {n}(std::string_view text)",
         body="  std::vector<std::string> lines;\n  std::size_t start = 0;\n  while (start <= text.size()) {\n    std::size_t end = text.find('\\n', start);\n    if (end == std::string_view::npos) end = text.size();\n    std::size_t stop = end;\n    if (stop > start && text[stop - 1] == '\\r') --stop;\n    lines.emplace_back(text.substr(start, stop - start));\n    start = end + 1;\n  }\n  return lines;",
         tests=[("HandlesCrLf", "{n}(\"a\\r\\nb\").size()", "2u"), ("KeepsEmptyLines", "{n}(\"a\\n\\nb\")[1]", '""')],
         psig="{n}(text)", pbody="    return [line.rstrip(\"\\r\") for line in text.split(\"\\n\")]",
         ptests=[('{n}("a\\r\\nb")', '["a", "b"]'), ('{n}("a\\n\\nb")', '["a", "", "b"]')],
         explain="The loop finds each newline, drops a carriage return just before it, and copies the line once; an empty line between two newlines stays in the result."),
    dict(names=["TrimSpaces", "Strip", "TrimWhitespace"],
         desc=["removes leading and trailing whitespace from a string", "trims spaces, tabs and newlines at both ends of a string"],
         inc=["<string_view>"], sig="std::string_view {n}(std::string_view text)",
         body="  const auto first = text.find_first_not_of(\" \\t\\r\\n\");\n  if (first == std::string_view::npos) return {};\n  const auto last = text.find_last_not_of(\" \\t\\r\\n\");\n  return text.substr(first, last - first + 1);",
         tests=[("TrimsBothEnds", '{n}("  hi \\n")', '"hi"'), ("AllSpaces", '{n}("   ")', '""')],
         psig="{n}(text)", pbody="    return text.strip()",
         ptests=[('{n}("  hi \\n")', '"hi"'), ('{n}("   ")', '""')],
         explain="Returning a view avoids any allocation: the result points into the caller's string between the first and last non-space characters."),
    dict(names=["ToUpper", "Uppercase", "Shout"],
         desc=["converts a string to upper case", "returns a copy of a string with every letter capitalised"],
         inc=["<cctype>", "<string>"], sig="std::string {n}(std::string text)",
         body="  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));\n  return text;",
         tests=[("UppercasesLetters", '{n}("abc1")', '"ABC1"')],
         psig="{n}(text)", pbody="    return text.upper()",
         ptests=[('{n}("abc1")', '"ABC1"')],
         explain="The string is taken by value, changed in place and returned, so the caller's copy is untouched and no second buffer is needed."),
    dict(names=["JoinWith", "Join", "Concatenate"],
         desc=["joins a list of strings with a separator", "concatenates strings, putting a separator between neighbours"],
         inc=["<string>", "<vector>"], sig="std::string {n}(const std::vector<std::string>& parts, const std::string& sep)",
         body="  std::string out;\n  for (std::size_t i = 0; i < parts.size(); ++i) {\n    if (i > 0) out += sep;\n    out += parts[i];\n  }\n  return out;",
         tests=[("JoinsParts", '{n}({{"a", "b", "c"}}, "-")', '"a-b-c"'), ("EmptyList", '{n}({{}}, ",")', '""')],
         psig="{n}(parts, sep)", pbody="    return sep.join(parts)",
         ptests=[('{n}(["a", "b", "c"], "-")', '"a-b-c"'), ('{n}([], ",")', '""')],
         explain="The separator is added before every part except the first, so there is no trailing separator to remove."),
    dict(names=["Factorial", "ComputeFactorial", "Fact"],
         desc=["returns n factorial", "computes the factorial of a non-negative integer"],
         inc=["<cstdint>"], sig="std::uint64_t {n}(unsigned n)",
         body="  std::uint64_t result = 1;\n  for (unsigned i = 2; i <= n; ++i) result *= i;\n  return result;",
         tests=[("SmallValues", "{n}(5)", "120u"), ("ZeroIsOne", "{n}(0)", "1u")],
         psig="{n}(n)", pbody="    result = 1\n    for i in range(2, n + 1):\n        result *= i\n    return result",
         ptests=[("{n}(5)", "120"), ("{n}(0)", "1")],
         explain="The loop multiplies the numbers from 2 to n; the empty product for 0 and 1 is 1. A 64-bit result holds values up to 20 factorial."),
    dict(names=["Fibonacci", "NthFibonacci", "Fib"],
         desc=["returns the n-th Fibonacci number", "computes Fibonacci numbers iteratively"],
         inc=["<cstdint>"], sig="std::uint64_t {n}(unsigned n)",
         body="  std::uint64_t a = 0, b = 1;\n  for (unsigned i = 0; i < n; ++i) {\n    const std::uint64_t next = a + b;\n    a = b;\n    b = next;\n  }\n  return a;",
         tests=[("FirstValues", "{n}(10)", "55u"), ("Zero", "{n}(0)", "0u")],
         psig="{n}(n)", pbody="    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
         ptests=[("{n}(10)", "55"), ("{n}(0)", "0")],
         explain="Keeping only the last two values makes the computation linear in n with constant memory, unlike the naive recursion."),
    dict(names=["Gcd", "GreatestCommonDivisor", "CommonDivisor"],
         desc=["returns the greatest common divisor of two integers", "computes the GCD with Euclid's algorithm"],
         inc=[], sig="long long {n}(long long a, long long b)",
         body="  if (a < 0) a = -a;\n  if (b < 0) b = -b;\n  while (b != 0) {\n    const long long r = a % b;\n    a = b;\n    b = r;\n  }\n  return a;",
         tests=[("CommonFactor", "{n}(12, 18)", "6"), ("WithZero", "{n}(7, 0)", "7")],
         psig="{n}(a, b)", pbody="    a, b = abs(a), abs(b)\n    while b:\n        a, b = b, a % b\n    return a",
         ptests=[("{n}(12, 18)", "6"), ("{n}(7, 0)", "7")],
         explain="Euclid's algorithm replaces the pair by (b, a mod b); the second value strictly decreases, so the loop ends, and the last non-zero value is the divisor."),
    dict(names=["IsPrime", "CheckPrime", "PrimeTest"],
         desc=["tells whether a number is prime", "checks primality by trial division"],
         inc=[], sig="bool {n}(long long n)",
         body="  if (n < 2) return false;\n  for (long long d = 2; d * d <= n; ++d) {\n    if (n % d == 0) return false;\n  }\n  return true;",
         tests=[("Primes", "{n}(13)", "true"), ("Composite", "{n}(15)", "false"), ("One", "{n}(1)", "false")],
         psig="{n}(n)", pbody="    if n < 2:\n        return False\n    d = 2\n    while d * d <= n:\n        if n % d == 0:\n            return False\n        d += 1\n    return True",
         ptests=[("{n}(13)", "True"), ("{n}(15)", "False")],
         explain="A composite number has a divisor no larger than its square root, so trial division can stop there."),
    dict(names=["LowerBound", "FirstNotLess", "SearchFirst"],
         desc=["returns the first index whose value is not less than a key in a sorted list", "does a binary search for the insertion point of a key"],
         inc=["<cstddef>", "<vector>"], sig="std::size_t {n}(const std::vector<int>& sorted, int key)",
         body="  std::size_t lo = 0, hi = sorted.size();\n  while (lo < hi) {\n    const std::size_t mid = lo + (hi - lo) / 2;\n    if (sorted[mid] < key) {\n      lo = mid + 1;\n    } else {\n      hi = mid;\n    }\n  }\n  return lo;",
         tests=[("FindsFirstEqual", "{n}({{1, 3, 3, 5}}, 3)", "1u"), ("PastTheEnd", "{n}({{1, 2}}, 9)", "2u")],
         psig="{n}(sorted_values, key)", pbody="    lo, hi = 0, len(sorted_values)\n    while lo < hi:\n        mid = (lo + hi) // 2\n        if sorted_values[mid] < key:\n            lo = mid + 1\n        else:\n            hi = mid\n    return lo",
         ptests=[("{n}([1, 3, 3, 5], 3)", "1"), ("{n}([1, 2], 9)", "2")],
         explain="The half-open range [lo, hi) always contains the answer; each step halves it, and computing mid as lo + (hi - lo) / 2 avoids overflow."),
    dict(names=["Dedupe", "UniqueInOrder", "RemoveDuplicates"],
         desc=["removes duplicates from a list while keeping the first occurrence order", "returns the distinct values of a list in their original order"],
         inc=["<unordered_set>", "<vector>"], sig="std::vector<int> {n}(const std::vector<int>& values)",
         body="  std::unordered_set<int> seen;\n  std::vector<int> out;\n  for (int v : values) {\n    if (seen.insert(v).second) out.push_back(v);\n  }\n  return out;",
         tests=[("KeepsOrder", "{n}({{3, 1, 3, 2, 1}}).size()", "3u")],
         psig="{n}(values)", pbody="    seen = set()\n    out = []\n    for v in values:\n        if v not in seen:\n            seen.add(v)\n            out.append(v)\n    return out",
         ptests=[("{n}([3, 1, 3, 2, 1])", "[3, 1, 2]")],
         explain="A hash set remembers which values were already emitted, so each value is kept the first time it appears and the whole pass stays linear."),
    dict(names=["CountWords", "WordCount", "NumberOfWords"],
         desc=["counts the words in a text, where words are separated by whitespace", "returns how many whitespace-separated words a string has"],
         inc=["<cctype>", "<string_view>"], sig="int {n}(std::string_view text)",
         body="  int words = 0;\n  bool in_word = false;\n  for (char c : text) {\n    if (std::isspace(static_cast<unsigned char>(c))) {\n      in_word = false;\n    } else if (!in_word) {\n      in_word = true;\n      ++words;\n    }\n  }\n  return words;",
         tests=[("CountsWords", '{n}("one two  three")', "3"), ("Empty", '{n}("")', "0")],
         psig="{n}(text)", pbody="    return len(text.split())",
         ptests=[('{n}("one two  three")', "3"), ('{n}("")', "0")],
         explain="A word starts at each non-space character that follows a space or the beginning of the text, so repeated spaces do not create empty words."),
    dict(names=["Clamp", "ClampValue", "Limit"],
         desc=["clamps a value into the range [lo, hi]", "limits a number to lie between a lower and an upper bound"],
         inc=[], sig="double {n}(double value, double lo, double hi)",
         body="  if (value < lo) return lo;\n  if (value > hi) return hi;\n  return value;",
         tests=[("BelowRange", "{n}(-1.0, 0.0, 1.0)", "0.0"), ("InsideRange", "{n}(0.5, 0.0, 1.0)", "0.5")],
         psig="{n}(value, lo, hi)", pbody="    return max(lo, min(value, hi))",
         ptests=[("{n}(-1.0, 0.0, 1.0)", "0.0"), ("{n}(0.5, 0.0, 1.0)", "0.5")],
         explain="Two comparisons decide whether the value lies below, above or inside the range."),
    dict(names=["CelsiusToFahrenheit", "ToFahrenheit", "ConvertTemperature"],
         desc=["converts a temperature from Celsius to Fahrenheit", "turns degrees Celsius into degrees Fahrenheit"],
         inc=[], sig="double {n}(double celsius)",
         body="  return celsius * 9.0 / 5.0 + 32.0;",
         tests=[("Freezing", "{n}(0.0)", "32.0"), ("Boiling", "{n}(100.0)", "212.0")],
         psig="{n}(celsius)", pbody="    return celsius * 9 / 5 + 32",
         ptests=[("{n}(0)", "32"), ("{n}(100)", "212")],
         explain="The conversion scales by 9/5 and shifts by 32, the Fahrenheit value of the freezing point."),
    dict(names=["Average", "Mean", "MeanValue"],
         desc=["returns the average of a list of numbers, or 0 for an empty list", "computes the arithmetic mean of a vector"],
         inc=["<vector>"], sig="double {n}(const std::vector<double>& values)",
         body="  if (values.empty()) return 0.0;\n  double sum = 0.0;\n  for (double v : values) sum += v;\n  return sum / static_cast<double>(values.size());",
         tests=[("AveragesValues", "{n}({{1.0, 2.0, 3.0}})", "2.0"), ("EmptyIsZero", "{n}({{}})", "0.0")],
         psig="{n}(values)", pbody="    if not values:\n        return 0.0\n    return sum(values) / len(values)",
         ptests=[("{n}([1.0, 2.0, 3.0])", "2.0"), ("{n}([])", "0.0")],
         explain="The empty case is handled first so the division never divides by zero."),
]

NAME_WORDS_A = ["Parse", "Split", "Merge", "Count", "Find", "Build", "Make", "Read", "Scan", "Collect", "Normalize", "Compute",
                "Extract", "Format", "Render", "Check", "Filter", "Group", "Sort", "Pack", "Load", "Encode", "Decode", "Walk"]
NAME_WORDS_B = ["Lines", "Words", "Fields", "Tokens", "Values", "Items", "Rows", "Columns", "Header", "Chunks", "Pairs",
                "Records", "Entries", "Digits", "Keys", "Names", "Parts", "Spans", "Blocks", "Bytes", "Text", "Totals"]

CPP_SYSTEMS = [
    "You are an experienced C++ developer. Put the code first and a brief explanation after it.",
    "You are a careful C++ programmer. Show the code, then explain it in a few sentences.",
    "You write modern, correct C++. Code first, short explanation second.",
    "You are a senior software engineer who answers with compact, well-tested C++.",
]
PY_SYSTEMS = [
    "You are an experienced Python developer. Show the code first, then a short explanation.",
    "You write clear, idiomatic Python.",
    "You are a programming tutor. Give working code and explain it briefly.",
]

CPP_PROMPTS = [
    "Write a C++20 function `{sig}` that {desc}.",
    "Implement `{sig}` in C++: it {desc}.",
    "In modern C++, write the function {name} with the signature `{sig}`. It {desc}.",
    "Please write a C++ function named {name} that {desc}. Use the signature `{sig}`.",
    "I need a C++17 function `{sig}`; it {desc}.",
    "Write `{sig}` in C++. The function {desc}.",
]
CPP_TEST_ASKS = [
    " Include {k} unit tests using GoogleTest.", " Add {k} GoogleTest cases.", " Also write {k} tests with GoogleTest.",
    " Add a couple of GoogleTest unit tests.",
]
PY_PROMPTS = [
    "Write a Python function `{sig}` that {desc}.",
    "Implement {name} in Python: `{sig}` {desc}.",
    "Write a Python function named {name} that {desc}.",
    "In Python, define `{sig}`, which {desc}.",
    "Please give me a Python function called {name} that {desc}.",
]
PY_TEST_ASKS = [" Include two pytest tests.", " Add a few tests with pytest.", " Also show how to test it with pytest."]


def code_name(rng, kind):
    if invented(rng):
        if from_vocabulary(rng):
            return vocabulary_name(rng)
        return made_up_word(rng).capitalize() + pick(rng, NAME_WORDS_B)
    if rng.random() < 0.4:
        return pick(rng, NAME_WORDS_A) + pick(rng, NAME_WORDS_B)
    return pick(rng, kind["names"])


def cpp_code(kind, name, with_tests, rng):
    k = len(kind["tests"]) if with_tests else 0
    includes = sorted(set(kind["inc"] + (["<gtest/gtest.h>"] if k else [])))
    head = "".join(f"#include {i}\n" for i in includes)
    fn = kind["sig"].format(n=name) + " {\n" + kind["body"] + "\n}\n"
    code = "```cpp\n" + (head + "\n" if head else "") + fn
    if k:
        suite = name + "Test"
        for case, expr, want in kind["tests"]:
            code += f"\nTEST({suite}, {case}) {{\n  EXPECT_EQ({expr.format(n=name)}, {want});\n}}\n"
    return code + "```"


def code_cpp(rng):
    kind = pick(rng, CODE_KINDS)
    name = code_name(rng, kind)
    sig = kind["sig"].format(n=name)
    user = pick(rng, CPP_PROMPTS).format(sig=sig, name=name, desc=pick(rng, kind["desc"]))
    with_tests = rng.random() < 0.5
    if with_tests:
        user += pick(rng, CPP_TEST_ASKS).format(k=pick(rng, ["two", "two", "three", "a few"]))
    system = pick(rng, CPP_SYSTEMS) if rng.random() < 0.5 else None
    code = cpp_code(kind, name, with_tests, rng)
    lead = "" if system or rng.random() < 0.5 else pick(rng, [f"Here is `{name}`:\n\n", "Here is an implementation:\n\n",
                                                               f"Sure. `{name}` can be written like this:\n\n"])
    tail = kind["explain"]
    if with_tests:
        tail += pick(rng, [" The tests cover the usual case and an edge case.", " The tests check a normal input and an edge case."])
    return example("code_cpp", user, lead + code + "\n\n" + tail, system=system)


def py_code(kind, name, with_tests):
    code = "```python\ndef " + kind["psig"].format(n=name) + ":\n" + kind["pbody"] + "\n"
    if with_tests:
        for i, (expr, want) in enumerate(kind["ptests"]):
            code += f"\n\ndef test_{name}_{i + 1}():\n    assert {expr.format(n=name)} == {want}\n"
    return code + "```"


def code_python(rng):
    kind = pick(rng, CODE_KINDS)
    name = snake(code_name(rng, kind))
    sig = kind["psig"].format(n=name)
    user = pick(rng, PY_PROMPTS).format(sig=sig, name=name, desc=pick(rng, kind["desc"]))
    with_tests = rng.random() < 0.35
    if with_tests:
        user += pick(rng, PY_TEST_ASKS)
    system = pick(rng, PY_SYSTEMS) if rng.random() < 0.3 else None
    lead = "" if rng.random() < 0.5 else pick(rng, [f"Here is `{name}`:\n\n", "Here is one way to write it:\n\n"])
    return example("code_python", user, lead + py_code(kind, name, with_tests) + "\n\n" + kind["explain"], system=system)


# Reasoning about code: explain a pitfall step by step, then Python with `def`.
REASONING_TASKS = [
    dict(task="a function that returns the index of the last element not greater than a key in a sorted list",
         name="last_not_greater",
         steps=["The answer is the position just before the first element that is greater than the key.",
                "A binary search keeps a half-open range [lo, hi) that must contain that boundary.",
                "The classic off-by-one error is writing hi = mid - 1 or using a closed range with lo <= hi, which skips the boundary or loops forever.",
                "When the boundary is found, subtract one; if it is 0, no element qualifies and we return -1."],
         code="def last_not_greater(values, key):\n    lo, hi = 0, len(values)\n    while lo < hi:\n        mid = (lo + hi) // 2\n        if values[mid] <= key:\n            lo = mid + 1\n        else:\n            hi = mid\n    return lo - 1",
         proof="Each iteration either raises lo or lowers hi, so hi - lo shrinks by at least one and the loop stops when the range is empty."),
    dict(task="an integer square root that returns the largest r with r * r <= n",
         name="isqrt",
         steps=["The answer lies between 0 and n, so we can binary search on r.",
                "The predicate r * r <= n is true for small r and false for large r, which is exactly what binary search needs.",
                "The common mistake is computing mid with rounding down while setting lo = mid, which can loop forever when hi = lo + 1.",
                "Rounding mid up fixes it: mid = (lo + hi + 1) // 2."],
         code="def isqrt(n):\n    lo, hi = 0, n\n    while lo < hi:\n        mid = (lo + hi + 1) // 2\n        if mid * mid <= n:\n            lo = mid\n        else:\n            hi = mid - 1\n    return lo",
         proof="Because mid is rounded up, mid > lo, so both branches shrink the range [lo, hi] and the loop terminates."),
    dict(task="a function that finds the largest sum of a contiguous slice of a list",
         name="max_subarray",
         steps=["Brute force tries every slice and takes quadratic time.",
                "Kadane's idea: the best slice ending at position i either extends the best slice ending at i - 1 or starts fresh at i.",
                "A frequent bug is starting the running best at 0, which gives the wrong answer when every value is negative.",
                "Start both the running sum and the answer at the first element instead."],
         code="def max_subarray(values):\n    best = current = values[0]\n    for v in values[1:]:\n        current = max(v, current + v)\n        best = max(best, current)\n    return best",
         proof="The loop visits each element once, so it ends after len(values) - 1 iterations."),
    dict(task="a check that a string of brackets is balanced",
         name="is_balanced",
         steps=["Every closing bracket must match the most recent unmatched opening bracket.",
                "A stack holds the unmatched openers.",
                "Two edge cases are easy to miss: a closer when the stack is empty, and openers left over at the end.",
                "Both mean the string is not balanced."],
         code="def is_balanced(text):\n    pairs = {')': '(', ']': '[', '}': '{'}\n    stack = []\n    for ch in text:\n        if ch in '([{':\n            stack.append(ch)\n        elif ch in pairs:\n            if not stack or stack.pop() != pairs[ch]:\n                return False\n    return not stack",
         proof="The loop runs once per character, so it always finishes; each step is constant time."),
    dict(task="a function that merges two sorted lists into one sorted list",
         name="merge_sorted",
         steps=["Walk both lists with one index each and always take the smaller head.",
                "The usual mistake is forgetting the leftovers when one list runs out first.",
                "After the loop, append whatever remains of either list.",
                "Using <= when comparing keeps the merge stable."],
         code="def merge_sorted(a, b):\n    i = j = 0\n    out = []\n    while i < len(a) and j < len(b):\n        if a[i] <= b[j]:\n            out.append(a[i])\n            i += 1\n        else:\n            out.append(b[j])\n            j += 1\n    out.extend(a[i:])\n    out.extend(b[j:])\n    return out",
         proof="Every iteration advances i or j, and neither can pass the length of its list, so the loop ends after at most len(a) + len(b) steps."),
    dict(task="fast exponentiation that computes base ** exp modulo m",
         name="power_mod",
         steps=["Multiplying exp times is too slow for large exponents.",
                "Square the base and halve the exponent; when the exponent is odd, multiply the result by the current base.",
                "A subtle bug is forgetting to reduce modulo m after each multiplication, which makes the numbers huge.",
                "Another is mishandling exp = 0, where the answer is 1 % m."],
         code="def power_mod(base, exp, m):\n    result = 1 % m\n    base %= m\n    while exp > 0:\n        if exp & 1:\n            result = result * base % m\n        base = base * base % m\n        exp >>= 1\n    return result",
         proof="The exponent is halved on every iteration, so the loop runs about log2(exp) times and stops when it reaches 0."),
    dict(task="a function that removes duplicates from a sorted list in place and returns the new length",
         name="compact_sorted",
         steps=["In a sorted list, duplicates are next to each other.",
                "Keep a write index for the next distinct value and a read index that scans the list.",
                "The off-by-one trap is comparing with the previous read position instead of the last written value.",
                "Handle the empty list first, since there is nothing to keep."],
         code="def compact_sorted(values):\n    if not values:\n        return 0\n    write = 1\n    for read in range(1, len(values)):\n        if values[read] != values[write - 1]:\n            values[write] = values[read]\n            write += 1\n    return write",
         proof="The for loop runs over a fixed range, so it terminates after len(values) - 1 iterations."),
    dict(task="a function that counts how many times a pattern occurs in a text, allowing overlaps",
         name="count_overlapping",
         steps=["str.count skips overlapping matches, so it is not enough.",
                "Search from each position after the start of the previous match, not after its end.",
                "An empty pattern would match everywhere, so treat it as a special case.",
                "Each found position moves the search start forward by one."],
         code="def count_overlapping(text, pattern):\n    if not pattern:\n        return 0\n    count, start = 0, 0\n    while True:\n        pos = text.find(pattern, start)\n        if pos < 0:\n            return count\n        count += 1\n        start = pos + 1",
         proof="start grows by at least one on each match and find fails once start passes the end of the text, so the loop ends."),
]

REASON_PREFIXES = [
    "Think step by step before you answer.", "Reason it through first, then answer.", "Let's think about this step by step.",
    "Work through the problem step by step, then give the answer.", "Explain your reasoning first.",
]
REASON_PROMPTS = [
    "{prefix} I want {task}. Where do off-by-one mistakes usually hide here? Then write it in Python.",
    "{prefix} Describe the usual pitfalls of {task}, then give a correct Python version and a short argument that it terminates.",
    "{prefix} Write {task} in Python, explaining first what typically goes wrong.",
    "{prefix} Walk me through {task} and then show the Python code, with a one-line termination argument.",
]


def reasoning(rng):
    t = pick(rng, REASONING_TASKS)
    user = pick(rng, REASON_PROMPTS).format(prefix=pick(rng, REASON_PREFIXES), task=t["task"])
    steps = "\n".join(f"{i + 1}. {s}" for i, s in enumerate(t["steps"]))
    code = "```python\n" + t["code"] + "\n```"
    if rng.random() < 0.3:   # thinking mode: the reasoning in the think block
        return example("reasoning", user, code + "\n\nTermination: " + t["proof"], think=steps)
    reply = pick(rng, ["Step by step:\n\n", "Let me reason first.\n\n", ""]) + steps + "\n\n" + code + "\n\nTermination: " + t["proof"]
    return example("reasoning", user, reply)


# ---------------------------------------------------------------------------
# Math word problems with a final "Answer:" line
# ---------------------------------------------------------------------------

ANSWER_ASKS = [
    " Show your work and finish with a line that starts with \"Answer:\".",
    " Put the final result on a last line beginning with \"Answer:\".",
    " Work it out, then write the answer on a separate line prefixed by \"Answer:\".",
    " End your reply with a line of the form \"Answer: ...\".",
    " Show the steps. The last line must start with Answer:",
    " Explain briefly, then give the result on its own line as \"Answer: <value>\".",
    "",
]


def clock(minutes):
    minutes = int(round(minutes)) % (24 * 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def math_travel(rng):
    d = rng.randint(20, 400)
    v = rng.choice([40, 45, 50, 60, 72, 75, 80, 90, 96, 100, 120])
    start = rng.randint(6 * 60, 18 * 60) // 5 * 5
    vehicle = pick(rng, ["A bus", "A car", "A cyclist", "A train", "A truck", "A ferry"])
    if vehicle == "A cyclist":
        v = rng.choice([15, 18, 20, 24, 25])
        d = rng.randint(10, 90)
    q = f"{vehicle} leaves at {clock(start)} and covers {d} km at an average speed of {v} km/h. When does it arrive?"
    hours = d / v
    work = [f"Time = distance / speed = {d} / {v} = {num(hours)} h = {num(hours * 60)} min.",
            f"Arrival = {clock(start)} + {num(hours * 60)} min = {clock(start + hours * 60)}."]
    return q, work, f"It arrives at {clock(start + hours * 60)}."


def math_catch_up(rng):
    v1 = rng.choice([60, 64, 70, 72, 75, 80, 84, 90])
    v2 = v1 + rng.choice([-8, 6, 10, 12, 15, 20, 24, 30])
    t1 = rng.randint(6 * 60, 14 * 60) // 5 * 5
    lag = rng.choice([15, 20, 30, 40, 45, 60])
    route = rng.randint(120, 480)
    kind_a, kind_b = pick(rng, [("train", "train"), ("car", "car"), ("bus", "car"), ("truck", "car"), ("cyclist", "scooter")])
    if kind_a == "cyclist":
        v1, v2, route = rng.choice([15, 18, 20]), rng.choice([25, 30, 16]), rng.randint(20, 80)
    a, b = (f"first {kind_a}", f"second {kind_b}") if kind_a == kind_b else (kind_a, kind_b)
    q = (f"A {kind_a} leaves {pick(rng, ['a city', 'the station', 'a depot', 'town'])} at {clock(t1)} and travels {route} km at "
         f"{v1} km/h. A {'second ' if kind_a == kind_b else ''}{kind_b} sets off from the same place at {clock(t1 + lag)} on the "
         f"same route at {v2} km/h. Does the {b} catch up, and if so when and where?")
    head = v1 * lag / 60
    work = [f"When the {b} starts, the {a} is {num(head)} km ahead ({v1} km/h x {num(lag / 60)} h)."]
    if v2 <= v1:
        work.append(f"The {b} is not faster ({v2} <= {v1} km/h), so the gap never closes.")
        return q, work, f"The {b} never catches up."
    t = head / (v2 - v1)
    dist = v2 * t
    work.append(f"The gap closes at {v2} - {v1} = {v2 - v1} km/h, so it takes {num(head)} / {v2 - v1} = {num(t)} h.")
    work.append(f"Distance from the start: {v2} x {num(t)} = {num(dist)} km.")
    if dist > route:
        work.append(f"That is beyond the {route} km the {a} travels, so the {a} arrives first.")
        return q, work, f"The {b} does not catch up before the {a} arrives."
    work.append(f"Time: {clock(t1 + lag)} + {num(t * 60)} min = {clock(t1 + lag + t * 60)}.")
    return q, work, f"The {b} catches up at {clock(t1 + lag + t * 60)}, {num(dist)} km from the start."


def math_shopping(rng):
    n = rng.randint(2, 12)
    price = rng.choice([1.5, 2.25, 3.8, 4.5, 7.2, 9.99, 12.5, 15, 24, 35])
    disc = rng.choice([0, 5, 10, 15, 20, 25])
    item = pick(rng, ["notebooks", "tickets", "coffee bags", "books", "plants", "shirts", "cables"])
    q = f"Each of {n} {item} costs {num(price)} euros." + (f" The shop gives a {disc}% discount on the total." if disc else "") + \
        " How much is paid?"
    total = n * price
    work = [f"Subtotal: {n} x {num(price)} = {num(total)} euros."]
    if disc:
        work.append(f"Discount: {disc}% of {num(total)} = {num(total * disc / 100)} euros.")
        total = total * (100 - disc) / 100
        work.append(f"Total: {num(total)} euros.")
    return q, work, f"{num(total)} euros"


def math_rectangle(rng):
    w, h = rng.randint(2, 60), rng.randint(2, 60)
    thing = pick(rng, ["garden", "room", "field", "table top", "poster"])
    unit = "m" if thing in ("garden", "room", "field") else "cm"
    q = f"A rectangular {thing} is {w} {unit} long and {h} {unit} wide. What are its area and perimeter?"
    work = [f"Area = {w} x {h} = {w * h} {unit}^2.", f"Perimeter = 2 x ({w} + {h}) = {2 * (w + h)} {unit}."]
    return q, work, f"area {w * h} {unit}^2, perimeter {2 * (w + h)} {unit}"


def math_percent(rng):
    p = rng.choice([5, 10, 12, 15, 20, 25, 30, 40, 75])
    y = rng.randint(2, 200) * 10
    q = pick(rng, [f"What is {p}% of {y}?", f"A class has {y} students and {p}% of them walk to school. How many walk?",
                   f"A price of {y} euros rises by {p}%. What is the new price?"])
    part = y * p / 100
    if "rises" in q:
        return q, [f"Increase: {p}% of {y} = {num(part)}.", f"New price: {y} + {num(part)} = {num(y + part)} euros."], \
            f"{num(y + part)} euros"
    return q, [f"{p}% of {y} = {y} x {p} / 100 = {num(part)}."], num(part)


def math_average(rng):
    vals = [rng.randint(1, 100) for _ in range(rng.randint(3, 7))]
    q = f"What is the average of {', '.join(map(str, vals[:-1]))} and {vals[-1]}?"
    s = sum(vals)
    return q, [f"Sum: {' + '.join(map(str, vals))} = {s}.", f"Average: {s} / {len(vals)} = {num(s / len(vals))}."], num(s / len(vals))


def math_work(rng):
    a, b = rng.choice([2, 3, 4, 5, 6, 8, 10, 12]), rng.choice([3, 4, 6, 8, 9, 12, 15])
    q = f"One pump fills a tank in {a} hours and another in {b} hours. How long do they take together?"
    t = a * b / (a + b)
    work = [f"Rates: 1/{a} and 1/{b} of the tank per hour.", f"Together: 1/{a} + 1/{b} = {a + b}/{a * b} per hour.",
            f"Time = {a * b}/{a + b} = {num(t)} hours."]
    return q, work, f"{num(t)} hours"


def math_time_diff(rng):
    s = rng.randint(5 * 60, 12 * 60)
    e = s + rng.randint(20, 10 * 60)
    q = f"A shift starts at {clock(s)} and ends at {clock(e)}. How long is it?"
    d = e - s
    return q, [f"From {clock(s)} to {clock(e)} is {d} minutes.", f"{d} minutes = {d // 60} h {d % 60} min."], \
        f"{d // 60} h {d % 60} min"


def math_interest(rng):
    p = rng.randint(1, 50) * 100
    r = rng.choice([2, 3, 4, 5, 6])
    y = rng.randint(1, 8)
    q = f"How much simple interest do {p} euros earn in {y} years at {r}% per year?"
    i = p * r * y / 100
    return q, [f"Interest = principal x rate x years = {p} x {r}/100 x {y} = {num(i)} euros."], f"{num(i)} euros"


def math_split_bill(rng):
    bill = rng.randint(30, 400)
    people = rng.randint(2, 8)
    tip = rng.choice([0, 10, 15, 20])
    q = f"A dinner costs {bill} euros" + (f" plus a {tip}% tip" if tip else "") + f", shared equally by {people} people. How much does each pay?"
    total = bill * (100 + tip) / 100
    work = ([f"Tip: {tip}% of {bill} = {num(bill * tip / 100)} euros, total {num(total)} euros."] if tip else []) + \
        [f"Each: {num(total)} / {people} = {num(total / people)} euros."]
    return q, work, f"{num(total / people)} euros each"


MATH_KINDS = [math_travel, math_catch_up, math_catch_up, math_shopping, math_rectangle, math_percent, math_average, math_work,
              math_time_diff, math_interest, math_split_bill]


def math(rng):
    q, work, answer = pick(rng, MATH_KINDS)(rng)
    user = q + pick(rng, ANSWER_ASKS)
    system = pick(rng, ["You are a patient math tutor.", "Solve problems carefully and show your work."] + GENERIC_SYSTEMS) \
        if rng.random() < 0.2 else None
    if rng.random() < 0.25:
        return example("math", user, work[-1] + "\n\nAnswer: " + answer, system=system, think="\n".join(work))
    return example("math", user, "\n".join(work) + "\n\nAnswer: " + answer, system=system)


# ---------------------------------------------------------------------------
# Translation: one line per language, the language name first
# ---------------------------------------------------------------------------

TRANSLATE_PROMPTS = [
    "Translate \"{s}\" into {langs}. Put each language on its own line, starting with the language name.",
    "Give the {langs} translations of this sentence, one line per language with the name first: \"{s}\"",
    "Translate the sentence below into {langs}. Write one line per language and begin each line with the language's name.\n{s}",
    "How do you say \"{s}\" in {langs}? One line for each language, name first.",
    "Please translate into {langs} (one line each, prefixed by the language): \"{s}\"",
    "Translate to {langs}, each on a separate line that starts with the language name: {s}",
]


def translate(rng):
    s, tr = pick(rng, SENTENCES)
    langs = rng.sample(range(len(LANGUAGES)), rng.randint(2, 5))
    names = [LANGUAGES[i] for i in langs]
    user = pick(rng, TRANSLATE_PROMPTS).format(s=s, langs=join_names(rng, names))
    reply = "\n".join(f"{LANGUAGES[i]}: {tr[i]}" for i in langs)
    return example("translate", user, reply, system=pick(rng, ["You are a professional translator."] + GENERIC_SYSTEMS)
                   if rng.random() < 0.15 else None)


# ---------------------------------------------------------------------------
# Greetings, explanations with headings, fables
# ---------------------------------------------------------------------------

GREET_OPEN = ["Hello!", "Hi!", "Hi there!", "Good morning!", "Hey!", "Good evening!", "Hello there!", ""]
GREET_ASK = [
    "What can you do?", "In a single sentence, tell me what you can do.", "Who are you?", "How can you help me?",
    "What kinds of tasks can you help with? Keep it to one sentence.", "Briefly, what are you good at?",
    "Can you introduce yourself in one line?", "How are you today?", "Nice to meet you. What do you do?",
]
GREET_REPLY = [
    "Hello! I can help you write and explain code, solve math problems, translate short texts, and answer questions.",
    "Hi! I'm a small assistant model: I can count, write simple functions, work through word problems, translate sentences and explain ideas.",
    "Hello! I'm happy to help with code, arithmetic, translations, short stories and explanations.",
    "Hi there! Ask me for a function, a calculation, a translation or a quick explanation, and I'll do my best.",
    "Good to meet you! I can write code, answer questions, solve word problems and translate simple sentences.",
    "I'm doing well, thanks for asking! I can help with code, math, translations and short explanations.",
]


def greeting(rng):
    user = (pick(rng, GREET_OPEN) + " " + pick(rng, GREET_ASK)).strip()
    return example("greeting", user, pick(rng, GREET_REPLY), system=pick(rng, GENERIC_SYSTEMS) if rng.random() < 0.2 else None)


EXPLAIN_PROMPTS = [
    "Explain {topic}. Use {n} short sections with headings.",
    "Write a short overview of {topic} in {n} sections, each with a heading.",
    "Give me a brief explanation of {topic}, organised under {n} headings.",
    "Describe {topic} in {n} parts with a heading for each part.",
    "Explain {topic} for a curious reader, in {n} headed sections.",
]
EXPLAIN_PLAIN = ["Explain {topic} briefly.", "What should I know about {topic}?", "Give a short explanation of {topic}."]
SCIENCE_SYSTEMS = ["You are a concise science writer.", "You explain technical ideas clearly and briefly.",
                   "You are a teacher who writes short, well-organised explanations."]


def explain(rng):
    topic = pick(rng, sorted(TOPICS))
    sections = TOPICS[topic]
    system = pick(rng, SCIENCE_SYSTEMS) if rng.random() < 0.4 else None
    if rng.random() < 0.8:
        n = rng.randint(2, min(4, len(sections)))
        chosen = sections[:n] if rng.random() < 0.6 else sorted(rng.sample(sections, n), key=sections.index)
        user = pick(rng, EXPLAIN_PROMPTS).format(topic=topic, n=pick(rng, [str(n), ["", "", "two", "three", "four"][n]]))
        style = rng.random()
        if style < 0.6:
            reply = "\n\n".join(f"## {h}\n\n{p}" for h, p in chosen)
        elif style < 0.85:
            reply = "\n\n".join(f"**{h}**\n{p}" for h, p in chosen)
        else:
            reply = "\n\n".join(f"### {i + 1}. {h}\n{p}" for i, (h, p) in enumerate(chosen))
    else:
        user = pick(rng, EXPLAIN_PLAIN).format(topic=topic)
        reply = " ".join(p for _, p in sections[:3])
    return example("explain", user, reply, system=system)


FABLE_PROMPTS = [
    "Tell a short fable of roughly {w} words about {c} who {h}. Finish with a one-sentence moral.",
    "Write a fable, around {w} words, about {c} who {h}. End with the moral in one sentence.",
    "Write a short fable about {c} who {h} (about {w} words). Close with a moral.",
    "I'd like a fable about {c} who {h}. Keep it near {w} words and end with a moral.",
    "Compose a brief fable ({w} words or so) in which {c} {h}. Give the moral at the end.",
]


def fable(rng):
    char, pron = pick(rng, FABLE_CHARACTERS)
    habit, warning, loss, change, moral = pick(rng, FABLE_HABITS)
    place = pick(rng, FABLE_PLACES)
    friend = pick(rng, FABLE_FRIENDS)
    event = pick(rng, FABLE_EVENTS)
    Pron = pron.capitalize()
    poss = "his" if pron == "he" else "her"
    w = pick(rng, [120, 150, 150, 180, 200, 200, 250])
    user = pick(rng, FABLE_PROMPTS).format(w=w, c=char, h=habit)
    name = char.split(" ", 1)[1]
    sentences = [
        f"Once, in {place}, there lived {char} who {habit}.",
        pick(rng, [f"Every day the {name} did the same thing, and every day {pron} felt very pleased.",
                   f"The {name} was proud of this habit and told everyone about it.",
                   f"Morning after morning the {name} kept at it, humming a little tune."]),
        pick(rng, [f"The neighbours shook their heads, but nobody wanted to argue.",
                   f"Days passed quietly, and the work that mattered waited.",
                   f"The seasons turned slowly, and nothing seemed to change."]),
        f"One day {friend} stopped by and said, \"Friend, be careful: {warning}.\"",
        pick(rng, [f"The {name} only laughed. \"There is plenty of time,\" {pron} said.",
                   f"\"Nonsense,\" answered the {name}. \"I know what I am doing.\"",
                   f"The {name} thanked the visitor politely and changed nothing at all."]),
        f"{event}.",
        f"Before long, {loss}.",
        pick(rng, [f"The {name} stood in the rain and saw what {poss} habit had cost.",
                   f"Looking at the damage, the {name} finally understood the warning.",
                   f"That evening the {name} sat alone and thought for a long time."]),
        pick(rng, [f"{friend[0].upper() + friend[1:]} came back and helped without a word of blame.",
                   f"It took many days to set things right again.",
                   f"{Pron} went to find {friend} and admitted the mistake."]),
        f"From then on, the {name} {change}.",
        pick(rng, ["Nobody in the village forgot the lesson.", "And the next season was a good one.",
                   f"Before long, others came to the {name} for advice."]),
    ]
    title = pick(rng, ["", f"**The {name.title()} and the Warning**\n\n", f"The {name.title()}\n\n"])
    reply = title + " ".join(sentences) + "\n\nMoral: " + moral
    return example("fable", user, reply)


# The families and how make_data.py names them in the config.
# ---------------------------------------------------------------------------
# Copying: say back made-up words, or put given items one per line
# ---------------------------------------------------------------------------

COPY_PROMPTS = [
    "Repeat exactly: {text}", "Say this back to me, word for word: {text}", "Copy the following text: {text}",
    "Echo these words and nothing else: {text}", "Write this again exactly as given: {text}",
]
LIST_PROMPTS = [
    "Write {items}, one per line.", "Put each of these on its own line: {items}.", "List {items}, one item per line, nothing else.",
    "One per line, please: {items}.",
]


def copy(rng):
    words = [made_up_word(rng, (1, 3)) for _ in range(rng.randint(2, 12))]
    if rng.random() < 0.3:
        words[0] = words[0].capitalize()
    text = " ".join(words)
    return example("copy", pick(rng, COPY_PROMPTS).format(text=text), text)


def list_lines(rng):
    pool = rng.random()
    n = rng.randint(2, 6)
    if pool < 0.35:
        items = rng.sample(LANGUAGES, min(n, len(LANGUAGES)))
    elif pool < 0.6:
        items = [c[0] for c in rng.sample(CITIES, n)]
    else:
        items = [made_up_word(rng).capitalize() for _ in range(n)]
    return example("list_lines", pick(rng, LIST_PROMPTS).format(items=join_names(rng, items)), "\n".join(items))


# ---------------------------------------------------------------------------
# Reading the prompt densely (stage 3): say back mixed text, stop where the prompt says
# ---------------------------------------------------------------------------

REPEAT_PROMPTS = COPY_PROMPTS + [
    "Repeat after me: {text}", "Type this out again, unchanged: {text}", "Say back exactly the following.\n\n{text}",
    "Here is some text:\n{text}\n\nWrite it out again exactly.", "Give me back this text as it is: {text}",
]


def prompt_piece(rng):
    """One of the things prompts name and answers must reuse: a made-up word, a function name,
    a number, a city, a language, a JSON key."""
    r = rng.random()
    if r < 0.3:
        w = made_up_word(rng, (1, 3))
        return w.capitalize() if rng.random() < 0.3 else w
    if r < 0.5:
        name = (pick(rng, NAME_WORDS_A) if rng.random() < 0.6 else made_up_word(rng).capitalize()) + pick(rng, NAME_WORDS_B)
        return snake(name) if rng.random() < 0.3 else name
    if r < 0.62:
        return str(rng.randint(0, 10 ** rng.randint(1, 6)))
    if r < 0.77:
        return pick(rng, CITIES)[0]
    if r < 0.9:
        return pick(rng, LANGUAGES)
    return pick(rng, list(CITY_KEYS) + list(BOOK_FIELDS))


def say_back(family, rng, pieces):
    text = pick(rng, [" ", " ", ", ", "\n"]).join(pieces)
    return example(family, pick(rng, REPEAT_PROMPTS).format(text=text), text)


def repeat(rng):
    return say_back("repeat", rng, [prompt_piece(rng) for _ in range(rng.randint(3, 20))])


def echo(rng):
    """Say back a run of vocabulary words, some joined into CamelCase names, some numbers."""
    pieces = []
    for _ in range(rng.randint(4, 30)):
        r = rng.random()
        if r < 0.7:
            pieces.append(pick(rng, VOCABULARY["words"]).strip())
        elif r < 0.9:
            pieces.append(vocabulary_name(rng, rng.randint(2, 3)))
        else:
            pieces.append(str(rng.randint(0, 10 ** rng.randint(1, 5))))
    return say_back("echo", rng, pieces)


def count_range(rng):
    """Short counts that end at large bounds: many places to learn to stop at the number asked."""
    b = rng.randint(100, 320) if rng.random() < 0.7 else rng.randint(3, 100)
    a = max(1, b - rng.randint(1, 25))
    user = pick(rng, COUNT_PROMPTS).format(a=a, a1=a + 1, b=b)
    return example("count_range", user, "\n".join(str(i) for i in range(a, b + 1)))


FAMILIES = {
    "copy": copy,
    "repeat": repeat,
    "echo": echo,
    "count_range": count_range,
    "list_lines": list_lines,
    "counting": counting,
    "json_city": json_city,
    "json_book": json_book,
    "facts": facts,
    "code_cpp": code_cpp,
    "code_python": code_python,
    "reasoning": reasoning,
    "math": math,
    "translate": translate,
    "greeting": greeting,
    "explain": explain,
    "fable": fable,
}
