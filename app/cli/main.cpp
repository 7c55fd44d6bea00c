// kvlens-cli: the headless side of KVLens. Every failure ends in one line on
// stderr naming what is wrong, and a non-zero exit code.
#include <c10/util/Exception.h>

#include <iostream>

#include "app/cli/common.h"
#include "core/cpu_tuning.h"
#include "core/error.h"
#include "core/safe_file.h"

int main(int argc, char** argv) {
    kvlens::restartWithTunedBlas(argv);
    CLI::App app{"KVLens command line: run models and KV-cache eviction policies headless", "kvlens-cli"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "kvlens-cli " KVLENS_VERSION);
    kvlens::cli::addInfoCommand(app);
    kvlens::cli::addTokenizeCommand(app);
    kvlens::cli::addGenerateCommand(app);
    kvlens::cli::addCompareCommand(app);
    kvlens::cli::addBenchCommand(app);
    kvlens::cli::addNeedleCommand(app);
    kvlens::cli::addExportCommand(app);
    kvlens::cli::addTrainCommand(app);
    kvlens::cli::addImportCommand(app);
    kvlens::cli::addMemoryCommand(app);
    kvlens::cli::addSweepCommand(app);
    if (argc > 1 && argv[1][0] != '-') {
        std::string known;
        bool found = false;
        for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
            known += (known.empty() ? "" : ", ") + sub->get_name();
            found = found || sub->get_name() == argv[1];
        }
        if (!found) {
            std::cerr << "kvlens-cli: error: unknown command '" << argv[1] << "' (commands: " << known << ")\n";
            return 2;
        }
    }
    try {
        app.parse(argc, argv);
        kvlens::checkStdout();  // output lost to a full disk or /dev/full is an error, not exit 0
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        // One line, like every other failure (CLI11 would add a second).
        std::cerr << "kvlens-cli: error: " << e.what() << " (see --help)\n";
        return e.get_exit_code() != 0 ? e.get_exit_code() : 2;
    } catch (const kvlens::Error& e) {
        std::cerr << "kvlens-cli: error: " << e.what() << "\n";
        return 1;
    } catch (const c10::Error& e) {
        std::cerr << "kvlens-cli: error: LibTorch: " << e.what_without_backtrace() << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "kvlens-cli: error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
