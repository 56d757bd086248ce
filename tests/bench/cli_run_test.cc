// `turbokv bench` through the real binary: where the default texts are
// found, which configurations each protocol runs, what an interrupted run
// leaves behind, exit statuses and the help text.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>
#include <algorithm>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bench/child_process.h"
#include "bench/json.h"
#include "bench_test_util.h"
#include "cli_runner.h"
#include "test_util.h"

namespace tkv::bench {
namespace {

namespace fs = std::filesystem;

// Runs turbokv in `cwd` through env(1), which applies `env` first
// ("-u", "NAME" unsets, "NAME=value" sets).
ChildResult turbokv(const std::vector<std::string>& args, const std::string& cwd,
                    const std::vector<std::string>& env) {
  std::vector<std::string> argv{"/usr/bin/env"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.push_back(::tkv::test::turbokv_binary());
  argv.insert(argv.end(), args.begin(), args.end());
  ChildLimits limits;
  limits.working_dir = cwd;
  return run_child(argv, limits);
}

size_t count_lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class BenchCliRun : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = ::tkv::test::model_path("stories260K.gguf");
    if (model_.empty()) TKV_MISSING_FIXTURE << "stories260K.gguf not found";
    if (::access(::tkv::test::turbokv_binary().c_str(), X_OK) != 0)
      GTEST_SKIP() << "turbokv binary not built: " << ::tkv::test::turbokv_binary();
    dir_ = ::tkv::test::temp_dir();
    text_ = test::write_story_text(dir_);
  }
  // A folder holding a link to the model and, when `with_text`, the default
  // text next to it; returns the model's path there.
  std::string model_in(const std::string& name, bool with_text) {
    const fs::path d = fs::path(dir_) / name;
    fs::create_directories(d);
    fs::create_symlink(fs::absolute(model_), d / "stories260K.gguf");
    if (with_text) fs::copy_file(text_, d / "tkv-test-heldout.txt");
    return (d / "stories260K.gguf").string();
  }
  std::string model_, dir_, text_;
};

std::vector<std::string> tiny_quality(const std::string& model, const std::string& out) {
  return {"bench", "quality", "-m", model, "--kv",  "f16", "--window-tokens", "64", "--windows",
          "1",     "-t",      "1",  "-q",  "--out", out};
}

TEST_F(BenchCliRun, DefaultTextIsFoundInTurbokvModelsOrNextToTheModelFromAnyDirectory) {
  const std::string elsewhere = dir_ + "/elsewhere";
  fs::create_directories(elsewhere);
  const std::string with_text = model_in("b", true);
  const std::string env_dir = dir_ + "/env";
  fs::create_directories(env_dir);
  fs::copy_file(text_, env_dir + "/tkv-test-heldout.txt");
  struct Case {
    std::vector<std::string> env;
    std::string model, expected_text;
  };
  const std::string next_to_model = dir_ + "/b/tkv-test-heldout.txt";
  for (const Case& c :
       {Case{{"-u", "TURBOKV_MODELS"}, with_text, next_to_model},
        Case{{"TURBOKV_MODELS=" + env_dir}, with_text, env_dir + "/tkv-test-heldout.txt"},
        // A TURBOKV_MODELS without the text: next to the model.
        Case{{"TURBOKV_MODELS=" + elsewhere}, with_text, next_to_model}}) {
    const std::string out = dir_ + "/out";
    const ChildResult r = turbokv(tiny_quality(c.model, out), elsewhere, c.env);
    ASSERT_EQ(r.exit_code, 0) << c.env.back() << "\n" << r.err;
    const Json rep = test::read_json_file(out + "/report.json");
    EXPECT_EQ(rep["quality"]["options"]["text_file"], c.expected_text) << c.env.back();
    EXPECT_EQ(rep["quality"]["rows"][0]["status"], "ok") << rep["quality"]["rows"][0].dump();
  }
}

// An --out given with a trailing slash (as a shell completes it) is joined
// as a path: what bench prints names report.json without a "//".
TEST_F(BenchCliRun, OutWithATrailingSlashPrintsPlainPaths) {
  const std::string with_text = model_in("c", true);
  const std::string out = dir_ + "/slash-out/";
  std::vector<std::string> args = tiny_quality(with_text, out);
  args.erase(std::find(args.begin(), args.end(), "-q"));
  const ChildResult r = turbokv(args, dir_, {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string both = r.out + r.err;
  EXPECT_NE(both.find("wrote " + dir_ + "/slash-out/report.json"), std::string::npos) << both;
  EXPECT_EQ(both.find("//"), std::string::npos) << both;
}

TEST_F(BenchCliRun, MissingDefaultTextNamesTheFlagAndTheVariable) {
  const std::string lonely = model_in("c", false);
  struct Case {
    std::vector<std::string> args;
    std::string flag;
  };
  for (const Case& c : {Case{{"bench", "quality", "-m", lonely, "--kv", "f16"}, "--text"},
                        Case{{"bench", "recall", "-m", lonely, "--kv", "f16"}, "--filler"},
                        Case{{"bench", "all", "-m", lonely, "--kv", "f16", "--skip",
                              "memory,speed,kernel", "--text", text_},
                             "--filler"}}) {
    const ChildResult r = turbokv(c.args, dir_, {"-u", "TURBOKV_MODELS"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(c.flag + " FILE"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("TURBOKV_MODELS"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("tkv-test-heldout.txt"), std::string::npos) << r.err;
  }
}

// Small settings for every protocol of `bench all`; no configuration lists.
std::vector<std::string> tiny_all(const std::string& model, const std::string& text,
                                  const std::string& out) {
  return {"bench", "all",
          "-m",    model,
          "-t",    "1",
          "-q",    "--out",
          out,     "--ctx",
          "64",    "--depths",
          "0,64",  "--steps",
          "3",     "--warmup",
          "0",     "--recall-ctx",
          "200",   "--facts",
          "1",     "--seeds",
          "1",     "--turns",
          "2",     "--multi-turn-window",
          "64",    "--filler",
          text,    "--text",
          text,    "--window-tokens",
          "64",    "--windows",
          "1",     "--kernel-depths",
          "64",    "--head-dims",
          "64",    "--kernel-threads",
          "1"};
}

// The configurations a section ran (the multi-turn variant's windowed
// twin, "f16:w64", counts as the configuration it was made from).
std::vector<std::string> kv_labels(const Json& section) {
  std::vector<std::string> out;
  for (const auto& r : section["rows"])
    if (!r.value("copy_bandwidth", false)) out.push_back(r["kv"].get<std::string>());
  if (section.contains("multi_turn"))
    for (const auto& r : section["multi_turn"]) {
      const std::string kv = r["kv"].get<std::string>();
      out.push_back(kv.substr(0, kv.find(":w")));
    }
  return out;
}

TEST_F(BenchCliRun, AllKvRestrictsEveryProtocolUnlessItsOwnListIsGiven) {
  const std::string out = dir_ + "/all";
  std::vector<std::string> args = tiny_all(model_, text_, out);
  args.insert(args.end(), {"--kv", "f16"});
  ChildResult r = turbokv(args, dir_, {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json rep = test::read_json_file(out + "/report.json");
  for (const char* s : {"memory", "speed", "recall", "quality", "kernel"}) {
    const auto labels = kv_labels(rep[s]);
    EXPECT_FALSE(labels.empty()) << s;
    for (const auto& l : labels) EXPECT_EQ(l, "f16") << s << ": " << rep[s]["rows"].dump();
  }
  EXPECT_FALSE(rep["recall"]["multi_turn"].empty());
  // A protocol's own list wins for that protocol only.
  args.insert(args.end(), {"--quality-kv", "k4v2:none", "--skip", "memory,speed,recall"});
  r = turbokv(args, dir_, {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  rep = test::read_json_file(out + "/report.json");
  EXPECT_EQ(kv_labels(rep["quality"]), std::vector<std::string>{"k4v2:none"});
  EXPECT_EQ(kv_labels(rep["kernel"]), std::vector<std::string>{"f16"});
}

// A multi-turn window no larger than a configuration's f16 residual window
// (k4v2: 64 tokens) is refused while the run is planned: one line, exit 2,
// no report of failed cells.
TEST_F(BenchCliRun, MultiTurnWindowWithinTheResidualIsRefusedBeforeRunning) {
  const std::string out = dir_ + "/mtw";
  std::vector<std::string> args = tiny_all(model_, text_, out);
  args.insert(args.end(), {"--kv", "k4v2", "--skip", "memory,speed,quality,kernel"});
  const ChildResult r = turbokv(args, dir_, {});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  // (tiny_all's contexts also draw a warning about the trained context.)
  const size_t e = r.err.find("error: --multi-turn-window 64");
  ASSERT_NE(e, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n', e), r.err.size() - 1) << "the error is one line, the last";
  EXPECT_NE(r.err.find("residual"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out + "/report.json"));
}

// A `bench all` command line narrows to one protocol by changing the subcommand.
TEST_F(BenchCliRun, SubcommandsAcceptTheFlagsBenchAllPassesThem) {
  const std::string out = dir_ + "/one";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"bench",
            "recall",
            "-m",
            model_,
            "--recall-kv",
            "f16",
            "--recall-ctx",
            "200",
            "--facts",
            "1",
            "--seeds",
            "1",
            "--turns",
            "2",
            "--multi-turn-window",
            "64",
            "--multi-turn-kv",
            "f16",
            "--filler",
            text_,
            "-t",
            "1",
            "-q",
            "--out",
            out},
           {"bench", "quality", "-m", model_, "--quality-kv", "f16", "--text", text_,
            "--window-tokens", "64", "--windows", "1", "-t", "1", "-q", "--out", out},
           {"bench", "kernel", "--kernel-kv", "f16", "--kernel-depths", "64", "--kernel-threads",
            "1", "--head-dims", "64", "-q", "--out", out}}) {
    const ChildResult r = turbokv(args, dir_, {});
    ASSERT_EQ(r.exit_code, 0) << args[1] << ": " << r.err;
    const Json rep = test::read_json_file(out + "/report.json");
    for (const auto& l : kv_labels(rep[args[1]])) EXPECT_EQ(l, "f16") << args[1];
    EXPECT_FALSE(kv_labels(rep[args[1]]).empty()) << args[1];
  }
}

// Ctrl-C (or SIGTERM, as timeout(1) sends) after the first cell: the report
// keeps the finished cells, marks the rest "not run", and the exit status
// says the run was interrupted.
TEST_F(BenchCliRun, SignalKeepsFinishedCellsAndMarksTheRestNotRun) {
  for (const int sig : {SIGINT, SIGTERM}) {
    const std::string out = dir_ + "/sig" + std::to_string(sig);
    // 32 cells: far more than can finish between the first and the signal.
    // SIGTERM runs with the progress lines on (stderr is not a terminal:
    // one line per cell), whose last line must not claim the run is done.
    std::vector<std::string> args = {"bench", "memory",
                                     "-m",    model_,
                                     "--kv",  "f16,k4v2,k8v8,q8_0",
                                     "--ctx", "64,96,128,160,192,224,256,288",
                                     "-t",    "1",
                                     "--out", out};
    if (sig == SIGINT) args.push_back("-q");
    ::tkv::test::CliProcess p(args);
    ASSERT_TRUE(p.running());
    // The report is rewritten after every cell: wait for the first one.
    bool first_done = false;
    for (int i = 0; i < 6000 && !first_done; ++i) {
      const Json j = Json::parse(read_text(out + "/report.json"), nullptr, false);
      first_done = j.is_object() && j.contains("run") && j["run"].value("cells_finished", 0) >= 1;
      if (!first_done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(first_done) << "no cell finished";
    p.send_signal(sig);
    const ::tkv::test::CliResult r = p.finish(120);
    EXPECT_EQ(r.exit_code, 128 + sig) << r.err;
    const std::string name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    EXPECT_NE(r.err.find("interrupted by " + name), std::string::npos) << r.err;
    if (sig == SIGTERM) {
      EXPECT_NE(r.err.find("stopped after "), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("] done"), std::string::npos) << r.err;
    }

    const Json rep = test::read_json_file(out + "/report.json");
    EXPECT_EQ(rep["run"]["state"], "interrupted");
    const Json& rows = rep["memory"]["rows"];
    ASSERT_EQ(rows.size(), 32u);
    size_t ok = 0, not_run = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::string status = rows[i]["status"].get<std::string>();
      if (status == "ok") {
        EXPECT_EQ(not_run, 0u) << "a finished cell after one not run: " << i;
        EXPECT_GT(rows[i]["peak_rss_bytes"].get<double>(), 0);
        ++ok;
      } else {
        EXPECT_EQ(status, "not run") << rows[i].dump();
        EXPECT_NE(rows[i]["reason"].get<std::string>().find(name), std::string::npos);
        ++not_run;
      }
    }
    EXPECT_GE(ok, 1u);
    EXPECT_GE(not_run, 1u);
    EXPECT_EQ(rep["run"]["cells_finished"], ok);
    const std::string md = read_text(out + "/report.md");
    EXPECT_NE(md.find("interrupted after " + std::to_string(ok) + " of 32 cells"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("not run: interrupted by " + name), std::string::npos) << md;
  }
}

// Rows that reached a limit (timeout under --cell-timeout; oom rows: see
// BenchHarness.TooLowMemoryLimitGivesOomRowsNotACrash) are results: exit 0.
// A cell that failed: exit 1.
TEST_F(BenchCliRun, TimeoutRowsExitZeroLikeOomRowsAndFailedRowsExitOne) {
  const std::string out = dir_ + "/exit";
  ChildResult r = turbokv({"bench", "memory", "-m", model_, "--kv", "f16", "--ctx", "64", "-t", "1",
                           "-q", "--cell-timeout", "0.001", "--out", out},
                          dir_, {});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::read_json_file(out + "/report.json")["memory"]["rows"][0]["status"], "timeout");
  const std::string short_text = dir_ + "/short.txt";
  std::ofstream(short_text) << "Once upon a time.\n";
  r = turbokv({"bench", "quality", "-m", model_, "--kv", "f16", "--text", short_text,
               "--window-tokens", "64", "--windows", "1", "-t", "1", "-q", "--out", out},
              dir_, {});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(test::read_json_file(out + "/report.json")["quality"]["rows"][0]["status"], "failed");
}

std::string help_line(const std::string& help) {
  const size_t at = help.find("  -h, --help");
  return at == std::string::npos ? std::string() : help.substr(at, help.find('\n', at) - at);
}

TEST_F(BenchCliRun, HelpHasTheLayoutOfTheOtherCommandsAndNoProjectJargon) {
  const ChildResult run = turbokv({"run", "--help"}, dir_, {});
  ASSERT_EQ(run.exit_code, 0);
  ASSERT_FALSE(help_line(run.out).empty()) << run.out;
  const ChildResult top = turbokv({"bench", "--help"}, dir_, {});
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_EQ(top.out.rfind("usage: turbokv bench SUBCOMMAND", 0), 0u) << top.out;
  EXPECT_NE(top.out.find("\nsubcommands:\n"), std::string::npos) << top.out;
  for (const char* sub : {"memory", "speed", "recall", "quality", "kernel", "all"}) {
    const ChildResult r = turbokv({"bench", sub, "--help"}, dir_, {});
    EXPECT_EQ(r.exit_code, 0) << sub;
    EXPECT_EQ(r.out.rfind(std::string("usage: turbokv bench ") + sub, 0), 0u) << r.out;
    EXPECT_EQ(help_line(r.out), help_line(run.out)) << r.out;
    if (std::string(sub) != "kernel") {
      EXPECT_NE(r.out.find("\nmodel:\n  -m, --model PATH "), std::string::npos) << r.out;
    }
    for (const std::string& text : {r.out, top.out})
      for (const char* word : {"issue", "Issue", "target", "Target", "MISSED"})
        EXPECT_EQ(text.find(word), std::string::npos) << sub << ": " << word << "\n" << text;
  }
}

// perplexity reads its text from standard input with -f -, as run and
// tokenize read a prompt; an unwritable --json fails before the model loads.
TEST_F(BenchCliRun, PerplexityReadsStandardInputAndChecksJsonFirst) {
  const std::string text = read_text(text_);
  const auto from_file =
      ::tkv::test::run_cli({"perplexity", "-m", model_, "-f", text_, "--window-tokens", "64",
                            "--windows", "1", "-t", "1"});
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  const auto from_stdin = ::tkv::test::run_cli(
      {"perplexity", "-m", model_, "-f", "-", "--window-tokens", "64", "--windows", "1", "-t", "1"},
      text);
  ASSERT_EQ(from_stdin.exit_code, 0) << from_stdin.err;
  EXPECT_NE(from_file.out.find("PPL "), std::string::npos) << from_file.out;
  EXPECT_EQ(from_stdin.out, from_file.out);

  const auto bad_json = ::tkv::test::run_cli(
      {"perplexity", "-m", "/nonexistent/model.gguf", "-f", text_, "--json", dir_});
  EXPECT_EQ(bad_json.exit_code, 2);
  EXPECT_NE(bad_json.err.find("--json"), std::string::npos) << bad_json.err;
  EXPECT_EQ(bad_json.err.find("model.gguf"), std::string::npos) << "checked after the model";
}

}  // namespace
}  // namespace tkv::bench
