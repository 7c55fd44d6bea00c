// kvlens-cli sweep: grids of needle and fidelity runs described by a sweep
// file (core/sweep/sweep.h, docs/sweeps.md), run in shards — here, in a
// local pool of processes, or as a Slurm job array — and merged into one
// JSON, one CSV and the figures. Every command can be rerun: finished probes
// are skipped, so a stopped shard loses at most the probe it was in.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

#include "app/cli/common.h"
#include "app/cli/figure_hook.h"
#include "core/error.h"
#include "core/study/needle_grid.h"
#include "core/sweep/sweep.h"
#include "core/sweep/sweep_run.h"

namespace kvlens::cli {
namespace {
namespace fs = std::filesystem;
using namespace kvlens::sweep;

// Ctrl+C (SIGINT) and scancel / a preempted node (SIGTERM): stop cleanly,
// after the probe in progress. A second signal while a shard runs in this
// process stops at once (a plug-in scorer that never returns would keep the
// first waiting forever); the pool's second kills its workers (runPool).
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
std::atomic<int> g_signals{0};
std::atomic<bool> g_exitOnSecond{false};
void onSignal(int sig) {
    g_stop.store(true);
    g_signal.store(sig);
    if (g_signals.fetch_add(1) >= 1 && g_exitOnSecond.load()) {
        static const char kSaid[] = "\nkvlens-cli: stopped at once (a second signal); the probe in progress is lost\n";
        [[maybe_unused]] const ssize_t n = ::write(2, kSaid, sizeof kSaid - 1);  // async-signal-safe, unlike stdio
        ::_exit(128 + sig);
    }
}
void catchStops() {
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

struct SweepArgs {
    std::string file;
    std::string output;    // overrides the file's "output"
    std::string shard;     // run: I/N
    int workers = 1;       // run: local pool size
    int shards = 0;        // plan / submit: 0 = the file's "shards"
    bool quiet = false;
    bool noMerge = false;
    std::string format = "png";  // merge: figure format
    double scale = 2.0;
    // submit
    bool slurm = false, dryRun = false, noWait = false;
    std::string partition, gres, time, mem, account, qos;
    int cpusPerTask = 0;
    std::vector<std::string> sbatchArgs;
    double poll = 1.0;
};

fs::path selfExe() {
    std::error_code ec;
    const fs::path p = fs::read_symlink("/proc/self/exe", ec);
    if (ec) throw IoError("cannot find this program's path (/proc/self/exe): " + ec.message());
    return p;
}

// The sweep file, with --output in place of its "output" when given.
SweepSpec loadSpec(const SweepArgs& a) {
    SweepSpec spec = readSweepFile(a.file);
    if (!a.output.empty()) spec.output = fs::absolute(a.output).lexically_normal();
    return spec;
}

std::string cellsText(int64_t done, int64_t total) {
    return std::to_string(done) + " of " + std::to_string(total) + " cells";
}

void printStatus(const SweepSpec& spec, const SweepStatus& st) {
    std::printf("%s: %s done (%lld of %lld probes); %zu probes missing, %zu failed\n", spec.name.c_str(),
                cellsText(st.doneCells, st.cells).c_str(), static_cast<long long>(st.doneProbes),
                static_cast<long long>(st.probes), st.missing.size(), st.failed.size());
    if (st.stale > 0)
        std::printf("  %lld result(s) written under other settings (run, needle or fidelity changed): ignored, run again\n",
                    static_cast<long long>(st.stale));
    if (st.foreign > 0)
        std::printf("  %lld result(s) of probes this sweep file no longer has: ignored\n", static_cast<long long>(st.foreign));
    for (const auto& [key, error] : st.failed) std::printf("  failed  %s: %s\n", key.c_str(), error.c_str());
    size_t shown = 0;
    for (const auto& key : st.missing) {
        if (std::any_of(st.failed.begin(), st.failed.end(), [&](const auto& f) { return f.first == key; })) continue;
        if (++shown > 20) {
            std::printf("  ... and more missing\n");
            break;
        }
        std::printf("  missing %s\n", key.c_str());
    }
}

// The progress bar of a run that is not this process's own (a pool, a Slurm array).
void drawBar(const SweepStatus& st, const std::string& suffix) {
    const int width = 30;
    const int filled = st.cells > 0 ? static_cast<int>(width * st.doneCells / st.cells) : width;
    std::fprintf(stderr, "\rsweep: [%s%s] %s%s", std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), '.').c_str(), cellsText(st.doneCells, st.cells).c_str(),
                 suffix.c_str());
}

// Writes OUTPUT/merged.json, merged.csv and the figures; returns the status.
SweepStatus merge(const SweepSpec& spec, const SweepArgs& a) {
    const std::string fmt = a.format;
    if (fmt != "png" && fmt != "svg" && fmt != "pdf") throw ArgumentError("--format: '" + fmt + "' is not png, svg or pdf");
    OutputGuard guard;
    guard.input(spec.file);
    guard.input(spec.fidelityText);
    for (const auto& d : spec.modelDirs) guard.inputFolder(d);
    const Merged m = mergeResults(spec, readResults(spec));
    const fs::path json = guard.output(spec.output / "merged.json", "merged JSON");
    const fs::path csv = guard.output(spec.output / "merged.csv", "merged CSV");
    fs::create_directories(spec.output);
    writeOutput(json.string(), m.toJson(spec).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    writeOutput(csv.string(), m.toCsv(spec));
    std::printf("wrote %s and %s (%s)\n", json.string().c_str(), csv.string().c_str(),
                cellsText(m.status.doneCells, m.status.cells).c_str());
    std::vector<std::pair<fs::path, std::function<void(const std::string&)>>> figures;
    for (size_t i = 0; i < spec.models.size(); ++i) {
        const std::string name = modelName(spec, i) + (spec.models.size() > 1 ? "-" + std::to_string(i) : "");
        if (m.hasTask(Task::Needle, i))
            figures.emplace_back(spec.output / "figures" / ("needle-" + name + "." + fmt), [&, i](const std::string& f) {
                exportNeedleFigure(m.needleGrid(spec, i), a.scale, f);
            });
        if (m.hasTask(Task::Fidelity, i) && !spec.policies.empty())
            figures.emplace_back(spec.output / "figures" / ("fidelity-" + name + "." + fmt), [&, i](const std::string& f) {
                exportFidelityFigure(fidelityCurves(m, i), modelName(spec, i) + " · " + spec.name, a.scale, f);
            });
    }
    for (auto& [file, draw] : figures) {
        guard.output(file, "figure");
        fs::create_directories(file.parent_path());
        try {
            draw(file.string());
            std::printf("wrote %s\n", file.string().c_str());
        } catch (const ArgumentError& e) {
            if (!figuresAvailable()) {
                std::printf("figures: %s\n", e.what());
                break;
            }
            throw;
        }
    }
    return m.status;
}

// 0: complete; 1: cells missing (named by status).
int mergeAndReport(const SweepSpec& spec, const SweepArgs& a) {
    const SweepStatus st = merge(spec, a);
    if (st.complete()) return 0;
    std::fprintf(stderr, "kvlens-cli: error: %s: %s missing (%zu probes; `kvlens-cli sweep status %s` lists them)%s\n",
                 spec.name.c_str(), cellsText(st.cells - st.doneCells, st.cells).c_str(), st.missing.size(),
                 spec.file.string().c_str(), st.failed.empty() ? "" : "; failed probes are listed in merged.json");
    return 1;
}

void runPlan(const SweepArgs& a) {
    const SweepSpec spec = loadSpec(a);
    const int shards = a.shards > 0 ? a.shards : spec.shards;
    const auto all = probes(spec);
    const auto cells = probeCells(spec);
    const auto results = readResults(spec);
    const SweepStatus st = sweepStatus(spec, results);
    std::printf("sweep %s: %zu probes x %zu cells = %lld cells, %d shard(s); output %s\n", spec.name.c_str(), all.size(),
                cells.size(), static_cast<long long>(cellCount(spec)), shards, spec.output.string().c_str());
    std::printf("cells of each probe:");
    for (const auto& [p, b] : cells) std::printf(" %s%s%s", p.c_str(), b == "-" ? "" : "@", b == "-" ? "" : b.c_str());
    std::printf("\n");
    std::vector<std::string> missing(st.missing.begin(), st.missing.end());
    for (int s = 0; s < shards; ++s) {
        const auto mine = shardProbes(all.size(), {s, shards});
        size_t todo = 0;
        for (size_t i : mine)
            if (std::find(missing.begin(), missing.end(), all[i].key(spec)) != missing.end()) ++todo;
        std::printf("shard %d/%d: %zu probes (%zu cells), %zu to run\n", s, shards, mine.size(), mine.size() * cells.size(), todo);
        for (size_t i : mine) {
            const std::string k = all[i].key(spec);
            const bool done = std::find(missing.begin(), missing.end(), k) == missing.end();
            std::printf("  %-5s %s\n", done ? "done" : "-", k.c_str());
        }
    }
}

void runStatus(const SweepArgs& a) {
    const SweepSpec spec = loadSpec(a);
    printStatus(spec, sweepStatus(spec, readResults(spec)));
}

// One shard in this process. Returns the exit code: 0 done, 1 a probe failed, 130 stopped.
int runOneShard(const SweepSpec& spec, const Shard& shard, bool quiet) {
    catchStops();
    g_exitOnSecond.store(true);
    const ShardReport r = runShard(spec, shard, folderLoader(spec),
                                   [&](int64_t i, int64_t n, const std::string& key) {
                                       if (!quiet)
                                           std::fprintf(stderr, "\rsweep %s: probe %lld of %lld: %s\033[K",
                                                        shard.text().c_str(), static_cast<long long>(i + 1),
                                                        static_cast<long long>(n), key.c_str());
                                   },
                                   &g_stop);
    if (!quiet && r.pending > 0) std::fprintf(stderr, "\n");
    if (r.cancelled) {
        std::fprintf(stderr, "sweep %s: stopped after %lld of %lld probes; rerun to continue\n", shard.text().c_str(),
                     static_cast<long long>(r.done + r.failed), static_cast<long long>(r.pending));
        return 130;
    }
    if (r.failed > 0) {
        std::fprintf(stderr, "kvlens-cli: error: sweep %s: %lld probe(s) failed; first: %s\n", shard.text().c_str(),
                     static_cast<long long>(r.failed), r.firstFailure.c_str());
        return 1;
    }
    return 0;
}

// The local back end: `workers` processes, each running shard i/workers.
int runPool(const SweepSpec& spec, const SweepArgs& a) {
    catchStops();
    const fs::path exe = selfExe();
    const fs::path file = fs::absolute(spec.file);
    std::vector<pid_t> children;
    const auto work = shardsWithWork(spec, a.workers, readResults(spec));
    for (int s : work) {
        const std::string shard = std::to_string(s) + "/" + std::to_string(a.workers);
        const pid_t pid = ::fork();
        if (pid < 0) throw IoError(std::string("cannot start a sweep worker: ") + std::strerror(errno));
        if (pid == 0) {
            ::signal(SIGINT, SIG_DFL);
            ::signal(SIGTERM, SIG_DFL);
            const std::string e = exe.string(), f = file.string(), out = spec.output.string();
            const char* argv[] = {e.c_str(), "sweep",    "run",   f.c_str(),    "--shard", shard.c_str(),
                                  "--output", out.c_str(), "--quiet", "--no-merge", nullptr};
            ::execv(e.c_str(), const_cast<char* const*>(argv));
            std::fprintf(stderr, "kvlens-cli: error: cannot start %s: %s\n", e.c_str(), std::strerror(errno));
            ::_exit(127);
        }
        children.push_back(pid);
    }
    int failed = 0, stopped = 0;
    size_t running = children.size();
    bool forwarded = false, killed = false;
    const std::string suffix = ", " + std::to_string(work.size()) + " worker(s)";
    while (running > 0) {
        for (auto& pid : children) {
            if (pid <= 0) continue;
            int status = 0;
            const pid_t got = ::waitpid(pid, &status, WNOHANG);
            if (got != pid) continue;
            pid = 0;
            --running;
            const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            if (code == 130 || (WIFSIGNALED(status) && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM ||
                                                        (killed && WTERMSIG(status) == SIGKILL))))
                ++stopped;
            else if (code != 0) ++failed;
        }
        if (g_stop.load() && !forwarded) {  // also when only this process was signalled
            for (pid_t pid : children)
                if (pid > 0) ::kill(pid, SIGINT);
            forwarded = true;
        }
        if (g_signals.load() >= 2 && !killed) {  // a second signal: the workers' probes in progress are given up
            for (pid_t pid : children)
                if (pid > 0) ::kill(pid, SIGKILL);
            killed = true;
        }
        if (!a.quiet) {
            try {
                drawBar(sweepStatus(spec, readResults(spec)), suffix);
            } catch (const Error&) {  // a results file being renamed into place: next time
            }
        }
        if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    if (!a.quiet) {
        drawBar(sweepStatus(spec, readResults(spec)), suffix);
        std::fprintf(stderr, "\n");
    }
    if (g_stop.load() || stopped > 0) {
        std::fprintf(stderr, "sweep: stopped; %s done, rerun to continue\n",
                     cellsText(sweepStatus(spec, readResults(spec)).doneCells, cellCount(spec)).c_str());
        return 130;
    }
    return failed > 0 ? 1 : 0;
}

int runRun(const SweepArgs& a) {
    const SweepSpec spec = loadSpec(a);
    if (a.workers < 1) throw ArgumentError("--workers must be at least 1");
    // Before any probe runs: an output folder that cannot be made (a read-only
    // place such as the installed examples' folder) is said at once.
    std::error_code ec;
    fs::create_directories(spec.output / "results", ec);
    if (ec)
        throw IoError("cannot create the sweep's output folder " + (spec.output / "results").string() + ": " +
                      ec.message() + " (give another with --output)");
    int code = 0;
    if (!a.shard.empty()) {
        const Shard shard = parseShard(a.shard);
        code = runOneShard(spec, shard, a.quiet);
        if (a.noMerge || code == 130) return code;
        // A shard run by hand: the last one to finish merges.
        const SweepStatus st = sweepStatus(spec, readResults(spec));
        if (!st.complete()) {
            std::printf("shard %s: done; the sweep has %s; `kvlens-cli sweep merge %s` once the other shards are done\n",
                        shard.text().c_str(), cellsText(st.doneCells, st.cells).c_str(), a.file.c_str());
            return code;
        }
        const int merged = mergeAndReport(spec, a);
        return code != 0 ? code : merged;
    } else {
        code = a.workers == 1 ? runOneShard(spec, {0, 1}, a.quiet) : runPool(spec, a);
        if (code == 130 || a.noMerge) return code;
    }
    const int merged = mergeAndReport(spec, a);
    return code != 0 ? code : merged;
}

std::string shellQuote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

// Runs a command, returns (exit code, stdout).
std::pair<int, std::string> capture(const std::string& command) {
    FILE* p = ::popen(command.c_str(), "r");
    if (!p) throw IoError("cannot run " + command);
    std::string out;
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int status = ::pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, out};
}

// A value written into sweep.sbatch: one line without control characters.
// Quoting protects a value from the shell, not from the script's lines: a
// line break in an #SBATCH directive or a comment ends it, and the next line
// runs as a command on the cluster.
const std::string& oneLine(const std::string& value, const std::string& what) {
    for (unsigned char c : value)
        if (c < 0x20 || c == 0x7f)
            throw ArgumentError(what + " holds a control character (such as a line break), which cannot be written "
                                       "into a Slurm script: expected one line of text");
    return value;
}

std::string sbatchScript(const SweepSpec& spec, const SweepArgs& a, int shards, const std::vector<int>& tasks) {
    std::ostringstream s;
    std::string array;
    for (int t : tasks) array += (array.empty() ? "" : ",") + std::to_string(t);
    const fs::path logs = fs::absolute(spec.output / "slurm").lexically_normal();
    const std::string sweepFile = fs::absolute(spec.file).lexically_normal().string();
    const std::string output = fs::absolute(spec.output).lexically_normal().string();
    oneLine(spec.name, spec.file.string() + ": the sweep's \"name\"");
    oneLine(sweepFile, "the sweep file's path");
    oneLine(output, "the output folder's path");
    oneLine(selfExe().string(), "kvlens-cli's own path");
    s << "#!/bin/bash\n"
      << "# KVLens sweep " << spec.name << ": shard $SLURM_ARRAY_TASK_ID of " << shards
      << " per array task (written by kvlens-cli sweep submit)\n"
      << "#SBATCH --job-name=" << shellQuote("kvlens-" + spec.name) << "\n"
      << "#SBATCH --array=" << array << "\n"
      << "#SBATCH --output=" << shellQuote((logs / "shard-%a.log").string()) << "\n";
    auto opt = [&](const char* name, const std::string& v) {
        if (!v.empty()) s << "#SBATCH --" << name << "=" << shellQuote(oneLine(v, std::string("--") + name)) << "\n";
    };
    opt("partition", a.partition);
    opt("gres", a.gres);
    opt("time", a.time);
    opt("mem", a.mem);
    opt("account", a.account);
    opt("qos", a.qos);
    if (a.cpusPerTask > 0) opt("cpus-per-task", std::to_string(a.cpusPerTask));
    for (const auto& extra : a.sbatchArgs) s << "#SBATCH " << oneLine(extra, "--sbatch-arg") << "\n";
    s << "exec " << shellQuote(selfExe().string()) << " sweep run " << shellQuote(sweepFile) << " --shard \"$SLURM_ARRAY_TASK_ID/"
      << shards << "\" --output " << shellQuote(output) << " --quiet --no-merge\n";
    return s.str();
}

int runSubmit(const SweepArgs& a) {
    if (!a.slurm) throw ArgumentError("sweep submit needs a back end: --slurm (the local pool is `sweep run --workers K`)");
    const SweepSpec spec = loadSpec(a);
    const int shards = a.shards > 0 ? a.shards : spec.shards;
    const auto tasks = shardsWithWork(spec, shards, readResults(spec));
    if (tasks.empty()) {
        std::printf("%s: every cell is done; merging\n", spec.name.c_str());
        return mergeAndReport(spec, a);
    }
    const std::string script = sbatchScript(spec, a, shards, tasks);
    if (a.dryRun) {
        std::cout << script;
        return 0;
    }
    OutputGuard guard;
    guard.input(spec.file);
    const fs::path file = guard.output(spec.output / "slurm" / "sweep.sbatch", "sbatch script");
    fs::create_directories(file.parent_path());
    writeOutput(file.string(), script);
    const auto [rc, out] = capture("sbatch --parsable " + shellQuote(file.string()) + " 2>&1");
    std::string job = out.substr(0, out.find_first_of(";\n"));
    if (rc != 0 || job.empty() || job.find_first_not_of("0123456789") != std::string::npos)
        throw ArgumentError("sbatch refused the job (" + std::to_string(rc) + "): " + out.substr(0, out.find('\n')));
    std::printf("submitted job %s: %zu array task(s) of %d shards (script %s)\n", job.c_str(), tasks.size(), shards,
                file.string().c_str());
    std::fflush(stdout);
    if (a.noWait) return 0;
    catchStops();
    const std::string suffix = ", Slurm job " + job;
    while (true) {
        const auto [qrc, queue] = capture("squeue -h -j " + job + " -o %T 2>/dev/null");
        if (!a.quiet) {
            try {
                drawBar(sweepStatus(spec, readResults(spec)), suffix);
            } catch (const Error&) {
            }
        }
        if (qrc != 0 || queue.find_first_not_of(" \n") == std::string::npos) break;  // left the queue
        if (g_stop.load()) {
            if (!a.quiet) std::fprintf(stderr, "\n");
            std::fprintf(stderr, "sweep: stopped following; job %s keeps running (`kvlens-cli sweep status %s`)\n",
                         job.c_str(), a.file.c_str());
            return 130;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(a.poll * 1000)));
    }
    if (!a.quiet) std::fprintf(stderr, "\n");
    return mergeAndReport(spec, a);
}

// A sweep command's own exit codes (1: cells missing or a probe failed,
// 130: stopped), after what it printed is known to have been written.
void exitOnFailure(int code) {
    if (code == 0) return;
    checkStdout();
    std::exit(code);
}

}  // namespace

void addSweepCommand(CLI::App& app) {
    auto args = std::make_shared<SweepArgs>();
    auto* cmd = app.add_subcommand("sweep", "grids of needle and fidelity runs from a sweep file: plan, run (local or "
                                            "Slurm), status, merge");
    cmd->require_subcommand(1);
    auto fileArg = [&](CLI::App* sub) {
        sub->add_option("FILE", args->file, "the sweep file (JSON, format kvlens-sweep; docs/sweeps.md)")->required();
        sub->add_option("--output", args->output, "the output folder, instead of the file's \"output\"");
    };
    auto figureArgs = [&](CLI::App* sub) {
        sub->add_option("--format", args->format, "figure format: png, svg or pdf")->capture_default_str();
        sub->add_option("--scale", args->scale, "PNG device pixels per point")->capture_default_str()->check(finiteReal());
    };
    auto* plan = cmd->add_subcommand("plan", "print the probes and cells and how they split into shards");
    fileArg(plan);
    plan->add_option("--shards", args->shards, "split into N shards (default: the file's \"shards\")")
        ->check(wholeNumber(1, kMaxShards));
    plan->callback([args] { runPlan(*args); });

    auto* run = cmd->add_subcommand("run", "run the sweep's missing probes: one shard (--shard I/N), or all in a local "
                                           "pool of --workers processes; then merge");
    fileArg(run);
    run->add_option("--shard", args->shard, "run only shard I of N (0-based), e.g. 2/4, and merge what is done");
    run->add_option("--workers", args->workers, "local pool: worker processes, each running one shard")
        ->capture_default_str()
        ->check(wholeNumber(1, maxThreads(), "in [1, 2x CPUs]"));
    run->add_flag("--quiet", args->quiet, "no progress on stderr");
    run->add_flag("--no-merge", args->noMerge, "do not merge when done");
    figureArgs(run);
    run->callback([args] {
        exitOnFailure(runRun(*args));
    });

    auto* status = cmd->add_subcommand("status", "show done, missing and failed probes");
    fileArg(status);
    status->callback([args] { runStatus(*args); });

    auto* merge = cmd->add_subcommand("merge", "write OUTPUT/merged.json, merged.csv and the figures from the results "
                                               "so far; exit 1 when cells are missing");
    fileArg(merge);
    figureArgs(merge);
    merge->callback([args] {
        exitOnFailure(mergeAndReport(loadSpec(*args), *args));
    });

    auto* submit = cmd->add_subcommand("submit", "run the missing shards as a Slurm job array (sbatch), follow it "
                                                 "(squeue) and merge when it ends");
    fileArg(submit);
    submit->add_flag("--slurm", args->slurm, "submit to Slurm (required: the back end)");
    submit->add_option("--shards", args->shards, "array tasks: N shards (default: the file's \"shards\")")
        ->check(wholeNumber(1, kMaxShards));
    submit->add_option("--partition", args->partition, "sbatch --partition");
    submit->add_option("--gres", args->gres, "sbatch --gres, e.g. gpu:1");
    submit->add_option("--time", args->time, "sbatch --time, e.g. 02:00:00");
    submit->add_option("--cpus-per-task", args->cpusPerTask, "sbatch --cpus-per-task");
    submit->add_option("--mem", args->mem, "sbatch --mem, e.g. 16G");
    submit->add_option("--account", args->account, "sbatch --account");
    submit->add_option("--qos", args->qos, "sbatch --qos");
    submit->add_option("--sbatch-arg", args->sbatchArgs, "another #SBATCH line, e.g. --sbatch-arg=--constraint=a100 (repeatable)")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    submit->add_flag("--dry-run", args->dryRun, "print the sbatch script; submit nothing");
    submit->add_flag("--no-wait", args->noWait, "submit and return (then `sweep status` / `sweep merge`)");
    submit->add_option("--poll", args->poll, "seconds between squeue polls")->capture_default_str()->check(finiteReal())
        ->check(CLI::Range(0.01, 3600.0));
    submit->add_flag("--quiet", args->quiet, "no progress on stderr");
    figureArgs(submit);
    submit->callback([args] {
        exitOnFailure(runSubmit(*args));
    });
}

}  // namespace kvlens::cli
