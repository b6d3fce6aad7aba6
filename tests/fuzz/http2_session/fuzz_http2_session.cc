// libFuzzer target for the HTTP/2 session (src/http2/session/). The input's first byte picks the
// chunk size the rest is fed in (1 to 256 bytes) and how the application behaves (answers with a
// body or not, defers bodies, consumes request bytes); the session sees the client preface, then
// the input as frames. After each chunk the output is produced and parsed back: a frame that
// overruns the output, a stream closed twice or a live stream count past the limit traps.
// Crashes and sanitizer reports are the other findings. Built with -fsanitize=fuzzer for
// fuzzing, and linked with tests/fuzz/replay_main.cc to replay the corpus in every build.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "http2/session/session.h"

namespace {

using namespace peregrine::http2::session;

struct App : Events {
  Session* session = nullptr;
  bool with_body = false;
  bool defer = false;
  bool consume = false;
  std::set<int32_t> open;
  std::set<int32_t> ended;

  void on_stream_begin(Stream& s) override {
    if (!open.insert(s.id).second) std::abort();  // a stream id opened twice
  }
  bool on_field(Stream&, std::string_view name, std::string_view, bool) override {
    return name != "x-reject";
  }
  void on_headers(Stream& s, bool end_stream, bool trailers) override {
    if (trailers || !end_stream) return;
    ended.insert(s.id);
  }
  void on_data(Stream& s, std::string_view bytes, bool end_stream) override {
    if (consume) session->consume(s.id, bytes.size());
    if (end_stream) ended.insert(s.id);
  }
  void on_stream_close(Stream& s, ErrorCode) override {
    if (open.erase(s.id) != 1) std::abort();  // closed twice, or never opened
  }
  void read_body(Stream&, std::string& out, size_t max, bool& last) override {
    if (defer) return;
    const size_t n = max < 100 ? max : 100;
    out.append(n, 'b');
    last = n < max || max == 0;
  }
};

void check_frames(std::string_view out) {
  while (!out.empty()) {
    if (out.size() < 9) std::abort();
    const auto* u = reinterpret_cast<const uint8_t*>(out.data());
    const size_t n = size_t{u[0]} << 16 | size_t{u[1]} << 8 | u[2];
    if (9 + n > out.size()) std::abort();
    out.remove_prefix(9 + n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const size_t chunk = (mode & 0x0f) == 0 ? size : (mode & 0x0f) * 16u + 1;
  App app;
  app.with_body = mode & 0x10;
  app.defer = mode & 0x20;
  app.consume = mode & 0x40;
  Options options;
  options.max_concurrent_streams = 8;
  options.max_header_list_size = 4096;
  options.reset_budget = 20;
  options.error_budget = 20;
  options.max_queued_control = 64;
  Session session(app, options);
  app.session = &session;
  std::string out;
  session.produce(out);
  check_frames(out);
  if (!session.receive("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")) std::abort();
  static const Session::Header kHead[] = {{":status", "200"}, {"server", "fuzz"}};
  size_t at = 1;
  while (at < size && session.want_read()) {
    const size_t n = size - at < chunk ? size - at : chunk;
    const bool ok = session.receive({reinterpret_cast<const char*>(data + at), n});
    at += n;
    if (ok) {
      for (int32_t id : app.ended) session.submit_response(id, kHead, app.with_body);
      app.ended.clear();
      if (app.defer && (mode & 0x80)) {
        app.defer = false;
        for (int32_t id : app.open) session.resume_data(id);
      }
    }
    if (session.live_streams() > options.max_concurrent_streams) std::abort();
    out.clear();
    session.produce(out);
    check_frames(out);
  }
  return 0;
}
