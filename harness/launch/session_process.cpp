#include "harness/launch/session_process.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "harness/launch/shell.hpp"

namespace tandem::harness {

namespace {

// Prints the pids of the live members of process group $1 started no earlier than $2
// (clock ticks since boot), one per line: what of a session's process is left.
constexpr const char* kMembers =
    "members() { cat /proc/[0-9]*/stat 2>/dev/null | awk -v pg=\"$1\" -v t=\"$2\" "
    "'{ p = $1; s = $0; sub(/^.*\\) /, \"\", s); split(s, f, \" \"); if (f[1] != \"Z\" && f[3] == pg && f[20] + 0 >= t + 0) print p }'; "
    "}\n";

// SIGTERM to the group's members, SIGKILL to what is left after `tenths` × 0.1 s; exits 0
// when none is left, else prints the survivors and exits 3.
std::string StopScript(int pgid, std::uint64_t start_ticks, int tenths) {
  return fmt::format(
      "{}pg={}; t={}\n"
      "m=$(members $pg $t); [ -z \"$m\" ] && exit 0\n"
      "kill -TERM $m 2>/dev/null\n"
      "i=0; while [ $i -lt {} ]; do m=$(members $pg $t); [ -z \"$m\" ] && exit 0; sleep 0.1; i=$((i+1)); done\n"
      "m=$(members $pg $t); [ -n \"$m\" ] && kill -KILL $m 2>/dev/null\n"
      "i=0; while [ $i -lt 30 ]; do m=$(members $pg $t); [ -z \"$m\" ] && exit 0; sleep 0.1; i=$((i+1)); done\n"
      "echo $m; exit 3\n",
      kMembers, pgid, start_ticks, tenths);
}

// User + system CPU seconds (with reaped children) of the process `pid_expression` names.
double CpuSecondsOn(const Host& host, const std::string& pid_expression) {
  const std::string script = fmt::format(
      "p={}; [ -n \"$p\" ] && [ -r /proc/$p/stat ] || exit 1\n"
      "sed 's/^.*) //' /proc/$p/stat | awk -v hz=\"$(getconf CLK_TCK)\" '{{ print ($12 + $13 + $14 + $15) / hz }}'",
      pid_expression);
  try {
    const CommandResult r = host.Run(script, std::chrono::seconds(10));
    return r.code == 0 ? std::stod(r.out) : 0.0;
  } catch (const std::exception&) {
    return 0.0;
  }
}

std::string Tail(const std::filesystem::path& file, std::size_t bytes) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  if (text.size() > bytes) text = "…" + text.substr(text.size() - bytes);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

std::string RemoteProcessScript(const std::vector<std::string>& command) {
  // The command's own session and group: setsid --fork --wait, whose complaint on stderr
  // ("child PID did not exit normally") is the one sign that a signal ended it (it then
  // exits with the signal's number, plus 128 for a core dump). That complaint is caught in
  // `said`; the command's own output goes to the original stdout and stderr (fds 3 and 4).
  const std::string inner =
      "exec 1>&3 2>&4 3>&- 4>&- </dev/null; printf 'tandem-process %s %s\\n' \"$$\" \"$(cut -d' ' -f22 /proc/$$/stat)\"; exec \"$@\"";
  return "env_text=$(cat) && eval \"$env_text\" || exit 125\n"
         "exec 3>&1 4>&2\n"
         "said=$(setsid -f -w sh -c " +
         ShellQuote(inner) + " tandem-process " + ShellJoin(command) +
         " 2>&1 >/dev/null)\n"
         "s=$?\n"
         "if [ -n \"$said\" ]; then\n"
         "  printf '%s\\n' \"$said\" >&2\n"
         "  if [ $((s & 128)) -ne 0 ]; then c=' core'; else c=''; fi\n"
         "  echo \"tandem-ended signal $((s & 127))$c\"\n"
         "else\n"
         "  echo \"tandem-ended code $s\"\n"
         "fi\n"
         "exit $s\n";
}

std::string EnvironmentScript(const std::map<std::string, std::string>& env) {
  std::string script;
  for (const auto& [name, value] : env) {
    const bool word = !name.empty() && !std::isdigit(static_cast<unsigned char>(name.front())) &&
                      std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!word) throw std::invalid_argument(fmt::format("'{}' is not an environment variable name", name));
    script += fmt::format("export {}={}\n", name, ShellQuote(value));
  }
  return script;
}

std::optional<ProcessEnd> ParseRemoteEnd(const std::string& line) {
  std::istringstream fields(line);
  std::string marker, kind, core;
  int number = -1;
  if (!(fields >> marker >> kind >> number) || marker != "tandem-ended" || number < 0) return std::nullopt;
  fields >> core;
  if (kind == "code") return ProcessEnd{.code = number};
  if (kind == "signal" && number > 0) return ProcessEnd{.signal = number, .core_dumped = core == "core"};
  return std::nullopt;
}

std::vector<std::string> ContainerCommand(const ProcessPlan& plan) {
  std::vector<std::string> run = {
      plan.engine, "run", "--rm", "--name", plan.container_name, "--label", "tandem.process=" + plan.container_name, "--network", "host"};
  for (const std::string& dir : plan.read_only) run.insert(run.end(), {"-v", dir + ":" + dir + ":ro"});
  if (!plan.cpus.empty()) run.insert(run.end(), {"--cpuset-cpus", plan.cpus});
  for (const auto& [key, value] : plan.env) run.insert(run.end(), {"--env", key});
  run.insert(run.end(), plan.run_args.begin(), plan.run_args.end());
  run.push_back(plan.image);
  run.insert(run.end(), plan.argv.begin(), plan.argv.end());
  return run;
}

std::unique_ptr<SessionProcess> SessionProcess::Start(const ProcessPlan& plan, std::chrono::milliseconds timeout) {
  if (plan.host == nullptr || plan.argv.empty()) throw std::invalid_argument("a process plan needs a host and a command");
  std::unique_ptr<SessionProcess> self(new SessionProcess(plan));
  const Host& host = *plan.host;
  const bool container = !plan.engine.empty();
  std::vector<std::string> command = container ? ContainerCommand(plan) : plan.argv;  // what runs on the host
  if (host.local()) {
    // Here the harness's own process group, pinning and death signal apply directly; the
    // environment goes to the process (or to the engine client, which passes it on).
    self->process_ = std::make_unique<ManagedProcess>(command, plan.env, plan.log, container ? "" : plan.cpus);
    self->pid_ = self->process_->pid();
    self->start_ticks_ = self->process_->start_ticks();
    return self;
  }
  if (!container && !plan.cpus.empty()) command.insert(command.begin(), {"taskset", "-c", plan.cpus});
  // On another host: its own session and process group there, which reports its pid and
  // start time first, then becomes the command; the ssh client streams its output, and
  // the environment goes over stdin.
  self->process_ = std::make_unique<ManagedProcess>(host.Command(RemoteProcessScript(command)), std::map<std::string, std::string>{},
                                                    plan.log, "", EnvironmentScript(plan.env));
  const auto line = self->process_->WaitForLine("tandem-process ", timeout);
  if (!line) {
    throw std::runtime_error(
        fmt::format("the {} on {} did not start (see {}): {}", plan.role, host.Describe(), plan.log.string(), Tail(plan.log, 400)));
  }
  std::istringstream fields(line->substr(line->find("tandem-process ") + 15));
  fields >> self->pid_ >> self->start_ticks_;
  if (self->pid_ <= 0)
    throw std::runtime_error(fmt::format("the {} on {}: unreadable process line '{}'", plan.role, host.Describe(), *line));
  return self;
}

SessionProcess::~SessionProcess() {
  try {
    Terminate(std::chrono::milliseconds(2000));
  } catch (const std::exception&) {
  }
}

std::optional<std::string> SessionProcess::WaitForLine(const std::string& needle, std::chrono::milliseconds timeout,
                                                       const std::string& progress) {
  return process_->WaitForLine(needle, timeout, progress);
}

bool SessionProcess::running() { return process_->running(); }

std::string SessionProcess::DescribeExit() {
  const std::string who = fmt::format("the {}{}", role(), host().local() ? "" : " on " + host().Describe());
  const std::string see = fmt::format(" (see {})", log().string());
  const std::optional<ProcessEnd> client = process_->End();
  if (!client) return fmt::format("{} is still running{}", who, see);
  ProcessEnd end = *client;
  if (!host().local()) {
    // How it ended there, as the wrapper on the host saw it; without that line only ssh's
    // end is known, and the process may still run there.
    const std::optional<ProcessEnd> there = ParseRemoteEnd(process_->LastLine(std::chrono::seconds(2)));
    if (!there) {
      if (client->killed())
        return fmt::format("the ssh client running {} {}; how it fared there is unknown{}", who, client->Describe(), see);
      return fmt::format("{}: ssh exited with code {}{}, and how the process ended there is unknown{}", who, client->code,
                         client->code == 255 ? " (the SSH connection failed or dropped)" : " without reporting how the process ended", see);
    }
    end = *there;
  }
  if (!plan_.engine.empty()) {
    // A container's end is what `engine run` returns: 128+N both for a process killed by
    // signal N and for one that exited with that code.
    const std::string container = fmt::format("{} (container {})", who, plan_.container_name);
    if (!end.killed() && end.code > 128 && end.code < 128 + 65) {
      return fmt::format("{} ended with code {} as `{} run` reports it, the code it gives a process killed by {}{}", container, end.code,
                         plan_.engine, DescribeSignal(end.code - 128), see);
    }
    return fmt::format("{}: `{} run` {}{}", container, plan_.engine, end.Describe(), see);
  }
  return fmt::format("{} {}{}", who, end.Describe(), see);
}

std::string SessionProcess::Terminate(std::chrono::milliseconds grace) {
  if (stopped_) return "";
  stopped_ = true;
  const Host& h = host();
  const auto grace_s = std::chrono::duration_cast<std::chrono::seconds>(grace).count();
  std::string left;
  if (!plan_.engine.empty()) {
    const std::string name = ShellQuote(plan_.container_name);
    const std::string engine = ShellQuote(plan_.engine);
    const std::string script =
        fmt::format("{0} stop -t {2} {1} >/dev/null 2>&1; {0} rm -f {1} >/dev/null 2>&1; {0} ps -a -q --filter name=^{3}$", engine, name,
                    std::max<long long>(grace_s, 1), plan_.container_name);
    try {
      const CommandResult r = h.Run(script, grace + std::chrono::seconds(60));
      std::string ids = r.out;
      while (!ids.empty() && (ids.back() == '\n' || ids.back() == ' ')) ids.pop_back();
      if (r.timed_out) left = fmt::format("container {} on {}: `{} stop` did not return", plan_.container_name, h.Describe(), plan_.engine);
      if (!ids.empty()) left = fmt::format("container {} on {} is still there ({})", plan_.container_name, h.Describe(), ids);
    } catch (const std::exception& e) {
      left = e.what();
    }
  } else if (!h.local()) {
    try {
      const CommandResult r =
          h.Run(StopScript(pid_, start_ticks_, static_cast<int>(grace.count() / 100)), grace + std::chrono::seconds(30));
      if (r.code != 0) {
        left = fmt::format("the {} on {}: {}", role(), h.Describe(),
                           r.timed_out ? "the stop did not return" : "processes still running: " + r.out);
      }
    } catch (const std::exception& e) {
      left = e.what();
    }
  }
  // The process itself here; the ssh or engine client otherwise.
  if (const std::string escaped = process_->Terminate(grace); !escaped.empty()) {
    left += (left.empty() ? "" : "; ") + fmt::format("the {}: {}", role(), escaped);
  }
  if (h.local() && plan_.engine.empty()) {
    // Nothing of its group may be left (a child that ignored SIGTERM and escaped the wait).
    // A child that dies with its parent (PR_SET_PDEATHSIG: spawned workers) needs a moment
    // after the parent is gone, more on a loaded machine: members get 2 s to go on their
    // own; whatever is left then is reported, and stopped.
    const std::string wait = fmt::format(
        "{}i=0; while [ $i -lt 20 ]; do m=$(members {} {}); [ -z \"$m\" ] && exit 0; sleep 0.1; i=$((i+1)); done; echo $m; exit 3\n",
        kMembers, pid_, start_ticks_);
    const CommandResult r = h.Run(wait, std::chrono::seconds(30));
    std::string survivors = r.out;
    while (!survivors.empty() && (survivors.back() == '\n' || survivors.back() == ' ')) survivors.pop_back();
    if (!survivors.empty()) {
      left += (left.empty() ? "" : "; ") + fmt::format("the {}: processes still running: {}", role(), survivors);
      h.Run(StopScript(pid_, start_ticks_, 10), std::chrono::seconds(30));
    }
  }
  return left;
}

nlohmann::json SessionProcess::Record(bool cpu_seconds) const {
  double cpu = 0;
  if (!cpu_seconds) {
  } else if (!plan_.engine.empty()) {
    cpu = CpuSecondsOn(host(), fmt::format("$({} inspect --format '{{{{.State.Pid}}}}' {} 2>/dev/null)", ShellQuote(plan_.engine),
                                           ShellQuote(plan_.container_name)));
  } else if (host().local()) {
    cpu = process_->CpuSeconds();
  } else {
    cpu = CpuSecondsOn(host(), std::to_string(pid_));
  }
  nlohmann::json r = {
      {"role", plan_.role}, {"host", host().name()}, {"pid", pid_}, {"start_ticks", start_ticks_}, {"log", plan_.log.string()}};
  if (cpu_seconds) r["cpu_seconds"] = cpu;
  if (!plan_.engine.empty()) {
    r["container"] = plan_.container_name;
    r["engine"] = plan_.engine;
  }
  return r;
}

std::optional<std::uint64_t> SessionProcess::ResidentBytes() const {
  // VmRSS in kB from /proc/PID/status, summed; "none" when no process could be read.
  const std::string sum = "awk '/^VmRSS:/ { s += $2; n++ } END { if (n) print s * 1024; else print \"none\" }'";
  std::string script;
  if (!plan_.engine.empty()) {
    script = fmt::format(
        "p=$({} inspect --format '{{{{.State.Pid}}}}' {} 2>/dev/null); [ -n \"$p\" ] && [ -r /proc/$p/status ] || exit 1\n"
        "{} /proc/$p/status",
        ShellQuote(plan_.engine), ShellQuote(plan_.container_name), sum);
  } else {
    script = fmt::format("{}m=$(members {} {}); [ -z \"$m\" ] && exit 1\nfor p in $m; do cat /proc/$p/status 2>/dev/null; done | {}",
                         kMembers, pid_, start_ticks_, sum);
  }
  try {
    const CommandResult r = host().Run(script, std::chrono::seconds(10));
    if (r.code != 0) return std::nullopt;
    std::size_t used = 0;
    const std::uint64_t bytes = std::stoull(r.out, &used);
    return used > 0 ? std::optional<std::uint64_t>(bytes) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;  // "none", or the host did not answer: no figure rather than a wrong one
  }
}

int KillLeftovers(const nlohmann::json& record, const Host& host) {
  int killed = 0;
  if (record.contains("container") && record.contains("engine")) {
    const std::string engine = ShellQuote(record["engine"].get<std::string>());
    const std::string name = record["container"].get<std::string>();
    // A name the harness made (tandem-HEX-cN-sN-ROLE) goes into a filter unquoted: refuse
    // anything else a store might hold.
    const bool word = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    });
    if (!word) throw std::invalid_argument(fmt::format("a recorded container name '{}' is not one the harness makes", name));
    const std::string script =
        fmt::format("if [ -n \"$({0} ps -a -q --filter name=^{1}$)\" ]; then {0} rm -f {2} >/dev/null 2>&1 && echo 1; fi", engine, name,
                    ShellQuote(name));
    const CommandResult r = host.Run(script, std::chrono::seconds(60));
    if (r.out.find('1') != std::string::npos) ++killed;
  }
  if (record.contains("pid") && record.contains("start_ticks")) {
    const int pid = record["pid"].get<int>();
    const auto start = record["start_ticks"].get<std::uint64_t>();
    if (pid > 0) {
      const CommandResult r =
          host.Run(fmt::format("{}m=$(members {} {}); [ -n \"$m\" ] && kill -KILL $m 2>/dev/null; echo $m | wc -w", kMembers, pid, start),
                   std::chrono::seconds(30));
      try {
        killed += std::stoi(r.out);
      } catch (const std::exception&) {
      }
    }
  }
  return killed;
}

}  // namespace tandem::harness
