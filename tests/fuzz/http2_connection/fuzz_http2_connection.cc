// libFuzzer target for a whole HTTP/2 connection: the input is what a client sends after the
// preface "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" (its SETTINGS, HEADERS, DATA, resets, window
// updates...). A real Worker, built from a small configuration (static files and a `return`
// route), hands the bytes to Worker::start_http2 over one end of a socket pair, exactly as a
// connection that saw the preface does; the server's answers go to the other end, unread. The
// worker is then torn down, which closes the connection mid-whatever it was doing. Crashes,
// sanitizer reports and leaks are the findings.
// Built with -fsanitize=fuzzer for fuzzing, and linked with tests/fuzz/replay_main.cc to replay
// the corpus in ordinary test runs.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "config/config.h"
#include "core/log.h"
#include "handlers/builtin.h"
#include "server/access_log.h"
#include "server/worker.h"

namespace {

using namespace peregrine;

struct Fixture {
  Fixture() {
    log::set_level(LogLevel::kError);
    char dir[] = "/tmp/peregrine-fuzz-h2-XXXXXX";
    if (!mkdtemp(dir)) std::abort();
    root = dir;
    write_file("file", std::string("hello world"));
    std::string big;
    for (int i = 0; i < 100000; ++i) big.push_back(static_cast<char>('a' + i % 26));
    write_file("big.bin", big);
    std::string text =
        "listen = [{ address = \"127.0.0.1:0\", http2 = true }]\nworkers = 1\n"
        "[limits]\nmax_header_bytes = \"4k\"\nmax_body_bytes = \"64k\"\n"
        "[[site]]\nhosts = [\"localhost\"]\ndefault = true\nroot = \"" +
        root +
        "\"\naccess_log = \"off\"\n"
        "[[site.route]]\nexact = \"/r\"\nreturn = 302\nlocation = \"/file\"\n"
        "[[site.route]]\nprefix = \"/\"\n";
    config::LoadResult loaded = config::load_string(text, "fuzz.toml", handlers::builtin());
    if (!loaded.config) {
      for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
      std::abort();
    }
    config = loaded.config;
  }
  void write_file(const char* name, const std::string& bytes) {
    std::string path = root + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) std::abort();
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  std::string root;
  std::shared_ptr<const config::Config> config;
  server::HandlerRegistry registry;
  server::AccessLogWriter writer;
  server::ListenerOptions listener{false, true};
};

Fixture* the_fixture = nullptr;

void remove_files() {
  for (const char* name : {"/file", "/big.bin"}) ::unlink((the_fixture->root + name).c_str());
  ::rmdir(the_fixture->root.c_str());
}

Fixture& fixture() {
  if (!the_fixture) {
    the_fixture = new Fixture;  // lives for the process: the writer thread too
    std::atexit(remove_files);
  }
  return *the_fixture;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Fixture& fx = fixture();
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) std::abort();
  {
    server::Worker worker(0, {}, fx.config, fx.registry, fx.writer, 1);
    if (!worker.ok()) std::abort();
    std::string input = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    input.append(reinterpret_cast<const char*>(data), size);
    sockaddr_in peer{};
    peer.sin_family = AF_INET;
    peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    peer.sin_port = htons(40000);
    worker.start_http2(pair[0], reinterpret_cast<const sockaddr*>(&peer), sizeof peer, input,
                       fx.listener);
  }  // the worker's teardown closes the connection (and pair[0]) wherever it stood
  ::close(pair[1]);
  return 0;
}
