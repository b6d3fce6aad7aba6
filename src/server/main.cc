// The peregrine binary: command line -> configuration snapshot -> ServerProcess.
#include <cstdio>
#include <string>

#include "config/cli.h"
#include "core/log.h"
#include "handlers/builtin.h"
#include "server/server_process.h"
#include "tls/record_buffers.h"

using namespace peregrine;

int main(int argc, char** argv) {
  tls::keep_record_buffers();  // before anything makes OpenSSL allocate (certificates, below)
  config::CommandLineResult parsed = config::parse_command_line(argc, argv);
  if (!parsed.error.empty()) {
    std::fprintf(stderr, "peregrine: %s\n\n%s", parsed.error.c_str(), config::usage().c_str());
    return 2;
  }
  const config::CommandLine& cli = parsed.cli;
  if (cli.help) {
    std::fputs(config::usage().c_str(), stdout);
    return 0;
  }
  if (cli.version) {
    std::printf("peregrine %s\n", PEREGRINE_VERSION);
    return 0;
  }
  config::LoadResult loaded = config::build_config(cli, handlers::builtin());
  if (!loaded.config) {
    for (const config::ConfigError& e : loaded.errors)
      std::fprintf(stderr, "%s\n", e.to_string().c_str());
    std::fprintf(stderr, "peregrine: configuration %s has %zu error(s)\n",
                 cli.config_file.empty() ? "(command line)" : cli.config_file.c_str(),
                 loaded.errors.size());
    return 1;
  }
  for (const config::ConfigError& w : loaded.warnings)
    std::fprintf(stderr, "%s\n", w.to_string().c_str());
  if (cli.tls_self_signed)
    std::fprintf(stderr, "peregrine: self-signed certificate, SHA-256 fingerprint %s\n",
                 config::self_signed_fingerprint().c_str());
  if (cli.test_only) {
    std::printf("peregrine: configuration %s is valid\n", loaded.config->source.c_str());
    return 0;
  }
  std::string error;
  if (!log::open(loaded.config->error_log, &error)) {
    std::fprintf(stderr, "peregrine: cannot open error log %s\n", error.c_str());
    return 1;
  }
  log::set_level(loaded.config->log_level);
  server::ServerProcess process(loaded.config, {},
                                [cli] { return config::build_config(cli, handlers::builtin()); });
  return process.run();
}
