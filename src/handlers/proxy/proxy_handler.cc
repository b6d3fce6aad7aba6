#include "handlers/proxy/proxy_handler.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/address_text.h"
#include "core/log.h"
#include "core/spares.h"
#include "core/strings.h"
#include "event/deferred.h"
#include "handlers/proxy/body_reader.h"
#include "handlers/proxy/request_head.h"
#include "http/header_names.h"
#include "http/http1/response_parser.h"
#include "upstream/exchange.h"

namespace peregrine::proxy {
namespace {

// Upstream bytes are read in pieces of this size: the memory a response costs us, whatever its
// length. Also the largest response head we accept.
constexpr size_t kReadBufferBytes = 64 * 1024;

std::string peer_address(const sockaddr* peer) {
  return std::string(AddressText(peer).ip_view());
}

// The value of cookie `name` in a Cookie header ("a=1; b=2"), or nullopt.
std::optional<std::string_view> find_cookie(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    size_t semi = header.find(';');
    std::string_view pair = trim_ows(header.substr(0, semi));
    size_t eq = pair.find('=');
    if (eq != std::string_view::npos && trim_ows(pair.substr(0, eq)) == name)
      return trim_ows(pair.substr(eq + 1));
    if (semi == std::string_view::npos) break;
    header.remove_prefix(semi + 1);
  }
  return std::nullopt;
}

// The field lines of a 101 head (status line first, then fields, then the empty line) as views,
// but for the ones the connection sets (http::is_set_by_connection). Continuation lines (obs-fold)
// are dropped. (Other heads come split by the response parser.)
void split_fields(std::string_view head, std::vector<HeaderView>& out) {
  size_t nl = head.find('\n');
  head.remove_prefix(nl == std::string_view::npos ? head.size() : nl + 1);
  while (!head.empty()) {
    nl = head.find('\n');
    std::string_view line = head.substr(0, nl);
    head.remove_prefix(nl == std::string_view::npos ? head.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') continue;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) continue;
    std::string_view name = line.substr(0, colon);
    if (!http::is_set_by_connection(name)) out.push_back({name, trim_ows(line.substr(colon + 1))});
  }
}

bool has_location_or_refresh(const std::vector<HeaderView>& fields) {
  for (const HeaderView& h : fields)
    if ((h.name.size() == 8 && ascii_iequals(h.name, "Location")) ||
        (h.name.size() == 7 && ascii_iequals(h.name, "Refresh")))
      return true;
  return false;
}

HeaderRules make_rules(const std::vector<std::string>& remove,
                       const std::vector<std::pair<std::string, std::string>>& set,
                       const std::vector<std::pair<std::string, std::string>>& add) {
  HeaderRules rules;
  rules.remove = remove;
  for (const auto& [name, value] : set) rules.set.push_back({name, value});
  for (const auto& [name, value] : add) rules.add.push_back({name, value});
  return rules;
}

}  // namespace

// One proxied request: the HTTP/1.1 codec on the shared upstream exchange (upstream/exchange.h),
// plus what only the proxy has: the 101 tunnel, the slow-client spool, the intercepted-error
// drain and the rewriting of the response head. It ends itself with end(), which hands it to
// event::dispose_later: a later event of the same batch may still reach it, and done() makes
// every entry point ignore it.
class ProxyExchange final : public upstream::UpstreamExchange,
                            public RecycledAllocation<ProxyExchange> {
 public:
  ProxyExchange(ProxyHandler& handler, const Request& request, handlers::Downstream& downstream)
      : UpstreamExchange("proxy", handler.group_, request, downstream, handler.timers_,
                         handler.clock_),
        handler_(handler) {
    for (std::string* b : {&spool_, &header_block_}) Spares<std::string>::take(*b);
  }

  ~ProxyExchange() override {
    if (spool_fd_ >= 0) ::close(spool_fd_);
    for (std::string* b : {&spool_, &header_block_}) Spares<std::string>::give(*b);
  }

  // Returns false when the exchange already ended (answered or failed) during the call.
  bool begin();

  bool on_body(std::string_view bytes, bool last) override;
  void on_writable() override;

 private:
  // Where the response stands, once the exchange is active.
  enum class Step : uint8_t {
    kRequest,       // sending the request, waiting for the response head
    kResponseBody,  // relaying the response body (head already sent to the client)
    kDrain,         // intercepted error: reading and discarding the upstream body
    kTunnel,        // after 101: bytes both ways
    kSpoolDrain,    // upstream done and released; the client takes the spooled rest
  };

  // upstream::UpstreamExchange hooks.
  upstream::PickContext pick_context() override;
  void on_readable() override { read_upstream(); }
  void on_attempt() override;
  void on_request_written() override;
  void on_write_error(int error) override;
  void on_active_timeout() override;
  bool may_reuse_connection() const override;
  void on_end() override;

  bool done() const { return phase_ == Phase::kDone; }
  void build_request_head();
  void read_upstream();
  void process_input();
  void process_head();
  void start_response();
  void start_tunnel(std::string_view head, size_t head_end);
  void fill_response_headers(std::vector<HeaderView>& fields, bool tunnel);
  void pump_body();
  bool deliver(std::string_view piece);
  bool spool_enabled() const;
  bool spooled() const { return spool_off_ < spool_.size() || file_read_ < file_write_; }
  bool spool_has_room() const;
  bool reading_paused() const { return client_full_ && !spool_has_room(); }
  void spool(std::string_view piece);
  bool spool_to_file(std::string_view piece);
  void drain_spool();
  void response_complete();
  void upstream_eof();
  void end_tunnel(int status);

  std::string_view pending_out() const { return std::string_view(out_).substr(out_sent_); }

  ProxyHandler& handler_;

  Step step_ = Step::kRequest;
  bool tunnel_ = false;           // an Upgrade request we forward as such
  bool chunked_request_ = false;  // the request body goes upstream chunked
  std::string client_ip_;
  std::string_view hash_key_;

  // Request bytes beyond the base's: the head's length at the start of out_ (while nothing was
  // dropped), so that "upstream" Host mode can rewrite it for another server.
  size_t head_len_ = 0;
  bool write_broken_ = false;      // the upstream stopped reading: discard further body bytes
  bool shutdown_pending_ = false;  // tunnel: the client closed its side; shut ours after flushing

  // Response bytes.
  std::unique_ptr<char[]> in_;
  size_t in_off_ = 0;  // consumed
  size_t in_len_ = 0;  // filled
  http1::ResponseParser parser_;
  http1::BodyFraming framing_ = http1::BodyFraming::kNone;
  BodyReader body_reader_;
  bool keep_alive_ = false;
  bool streamed_ = false;     // send_head() was called
  bool client_full_ = false;  // send_body() said kFull: wait for on_writable()

  // The spool for slow clients: what the client cannot take yet is kept (memory up to
  // proxy_buffer, then a temporary file up to proxy_temp_file_max) so that the upstream
  // connection is read to the end and released early. Memory part first, then the file.
  std::string spool_;
  size_t spool_off_ = 0;
  int spool_fd_ = -1;
  uint64_t file_write_ = 0;  // bytes written to the file
  uint64_t file_read_ = 0;   // of which sent
  std::unique_ptr<char[]> file_scratch_;
  int status_ = 0;
  std::string header_block_;  // response header lines taken over as they are (fast path)
};

// ---------------------------------------------------------------------------------------------
// Starting.

bool ProxyExchange::begin() {
  const ProxyOptions& options = handler_.options_;
  client_ip_ = peer_address(request_.peer);
  tunnel_ = request_.upgrade && options.websocket;
  chunked_request_ = request_.chunked && !tunnel_;
  request_done_ = !request_.has_body() || tunnel_;

  const config::HashKey& hash = handler_.group_.config().hash_key;
  switch (hash.source) {
    case config::HashKey::Source::kNone:
      break;
    case config::HashKey::Source::kUri:
      hash_key_ = request_.path;
      break;
    case config::HashKey::Source::kHeader:
      hash_key_ = request_.header(hash.name).value_or(std::string_view());
      break;
    case config::HashKey::Source::kCookie:
      for (const peregrine::Header& h : request_.header_list()) {
        if (!ascii_iequals(h.name, "Cookie")) continue;
        if (auto value = find_cookie(h.value, hash.name)) {
          hash_key_ = *value;
          break;
        }
      }
      break;
  }

  build_request_head();
  return start();
}

upstream::PickContext ProxyExchange::pick_context() {
  upstream::PickContext context;
  context.now_ms = now_ms();
  context.client_ip = client_ip_;
  context.hash_key = hash_key_;
  return context;
}

void ProxyExchange::build_request_head() {
  const ProxyOptions& options = handler_.options_;
  RequestContext context;
  context.client_ip = client_ip_;
  context.scheme = request_.secure ? "https" : "http";
  // "upstream" Host mode names the chosen server; before the choice (the first build) the
  // group's name stands in.
  std::string server_host = handler_.upstream_host_;
  if (has_slot_) {
    server_host = group_.server(server_).address;
    if (server_host.starts_with("unix:")) server_host = "localhost";
  }
  context.upstream_host = server_host;
  context.tunnel = tunnel_;
  const PathMapping mapping{handler_.map_path_, options.path_prefix, options.path};

  std::string head;
  head.reserve(512);
  append_request_head(head, request_, mapping, context, handler_.request_options_,
                      handler_.scratch_fields_);
  out_.replace(0, head_len_, head);
  head_len_ = head.size();
}

// A body too long to keep for a resend goes on a fresh connection: a pooled one may turn out to
// be stale only after part of the body is gone.
bool ProxyExchange::may_reuse_connection() const {
  return !request_.chunked && request_.content_length <= int64_t{upstream::kReplayLimit / 2};
}

void ProxyExchange::on_attempt() {
  step_ = Step::kRequest;
  write_broken_ = false;
  in_off_ = in_len_ = 0;
  parser_.start(request_.is_head());
  parser_.collect_fields(&handler_.scratch_fields_);
  if (out_sent_ == 0 && handler_.request_options_.host_mode == HostMode::kUpstream)
    build_request_head();  // Host names this server
}

// ---------------------------------------------------------------------------------------------
// Events.

void ProxyExchange::on_writable() {
  if (done() || !client_full_) return;
  client_full_ = false;
  drain_spool();
  if (done() || step_ == Step::kSpoolDrain || !conn_) return;
  if (step_ == Step::kTunnel)
    arm_io(handler_.options_.tunnel_idle_timeout.count());
  else
    arm_io(group_config().read_timeout.count());
  // Bytes still buffered first, then the socket (edge-triggered: it may hold more).
  process_input();
  if (!done() && !reading_paused()) read_upstream();
}

void ProxyExchange::on_active_timeout() {
  switch (step_) {
    case Step::kRequest:
    case Step::kResponseBody:
      UpstreamExchange::on_active_timeout();  // before the head, or in the body: 504
      return;
    case Step::kDrain:
      // The error page does not need the rest of the upstream body.
      close_upstream();
      response_complete();
      return;
    case Step::kTunnel:
      end_tunnel(504);
      return;
    case Step::kSpoolDrain:  // no upstream left; the client connection has its own timeout
      return;
  }
}

// The tunnel is over: the upstream side closed (`status` 0), went silent for tunnel_timeout
// (504) or broke (502). Not a failure of the server: it served the upgrade.
void ProxyExchange::end_tunnel(int status) {
  complete_upstream(false);
  if (status != 0)
    downstream_.fail(status);
  else
    downstream_.finish();
  end();
}

void ProxyExchange::on_end() {
  if (in_) handler_.give_back_buffer(std::move(in_));
}

// ---------------------------------------------------------------------------------------------
// The request.

bool ProxyExchange::on_body(std::string_view bytes, bool last) {
  if (done()) return true;
  if (step_ == Step::kTunnel && phase_ == Phase::kActive) {
    out_.append(bytes);
    if (last) shutdown_pending_ = true;
    arm_io(handler_.options_.tunnel_idle_timeout.count());
    if (conn_) write_out();
    if (done()) return true;
    if (pending_out().size() >= upstream::kSendHighWater) {
      body_paused_ = true;
      return false;
    }
    return true;
  }
  if (last) request_done_ = true;
  if (write_broken_) return true;  // the back end answered already and stopped reading

  if (chunked_request_) {
    if (!bytes.empty()) {
      char size_line[24];
      int n = snprintf(size_line, sizeof size_line, "%zx\r\n", bytes.size());
      out_.append(size_line, static_cast<size_t>(n));
      out_.append(bytes);
      out_.append("\r\n");
    }
    if (last) out_.append("0\r\n\r\n");
  } else {
    out_.append(bytes);
  }
  const bool dropping = !replayable_ || out_.size() > upstream::kReplayLimit;
  if (dropping && out_sent_ > 0) head_len_ = out_sent_ >= head_len_ ? 0 : head_len_ - out_sent_;
  const bool more = request_bytes_added();
  // A back end that stopped reading answered early: the rest of the body is discarded.
  return done() || write_broken_ || more;
}

void ProxyExchange::on_request_written() {
  if (!replayable_ || step_ == Step::kTunnel) head_len_ = 0;
  if (step_ == Step::kTunnel) arm_io(handler_.options_.tunnel_idle_timeout.count());
  if (shutdown_pending_) {
    shutdown_pending_ = false;
    if (conn_->tls()) conn_->tls()->shutdown();  // close_notify: TLS's own end of the stream
    ::shutdown(conn_->fd(), SHUT_WR);
  }
}

void ProxyExchange::on_write_error(int error) {
  if (step_ == Step::kTunnel) {
    end_tunnel(502);
    return;
  }
  if (!got_byte_ && retry_on_fresh_connection()) return;
  // The back end may have answered early (413, 401...) and stopped reading: take its answer if
  // there is one; upstream_eof()/errors decide otherwise.
  write_broken_ = true;
  write_blocked_ = false;
  out_.clear();
  out_sent_ = 0;
  head_len_ = 0;
  replayable_ = false;
  if (body_paused_) {
    body_paused_ = false;
    downstream_.resume_body();  // the rest of the body is discarded as it comes
    if (done()) return;
  }
  read_upstream();
  if (!done() && conn_ && step_ == Step::kRequest && !got_byte_)
    fail(upstream::Failure::kReset, "sending the request failed", std::strerror(error));
}

// ---------------------------------------------------------------------------------------------
// The response.

void ProxyExchange::read_upstream() {
  if (!in_) in_ = handler_.take_buffer();
  while (!done() && conn_) {
    if (reading_paused()) {
      disarm_io();  // the client's slowness is not the back end's
      return;
    }
    if (in_off_ == in_len_) {
      in_off_ = in_len_ = 0;
    } else if (in_len_ == kReadBufferBytes && in_off_ > 0) {
      std::memmove(in_.get(), in_.get() + in_off_, in_len_ - in_off_);
      in_len_ -= in_off_;
      in_off_ = 0;
    }
    if (in_len_ == kReadBufferBytes) {
      fail(upstream::Failure::kMalformed, "invalid response", "response head too large");
      return;
    }
    ssize_t n = receive(in_.get() + in_len_, kReadBufferBytes - in_len_);
    if (n > 0) {
      in_len_ += static_cast<size_t>(n);
      arm_io(step_ == Step::kTunnel ? handler_.options_.tunnel_idle_timeout.count()
                                    : group_config().read_timeout.count());
      process_input();
      continue;
    }
    if (n == 0) return;  // the socket is empty
    if (errno == 0) {
      upstream_eof();
      return;
    }
    const int error = errno;
    if (step_ == Step::kTunnel)
      end_tunnel(0);
    else
      fail(upstream::Failure::kReset,
           step_ == Step::kRequest ? "reading the response failed"
                                   : "reading the response body failed",
           std::strerror(error));
    return;
  }
}

void ProxyExchange::process_input() {
  switch (step_) {
    case Step::kRequest:
      process_head();
      return;
    case Step::kResponseBody:
    case Step::kDrain:
      pump_body();
      return;
    case Step::kTunnel:
      if (in_off_ < in_len_) {
        std::string_view bytes(in_.get() + in_off_, in_len_ - in_off_);
        in_off_ = in_len_;
        deliver(bytes);
      }
      return;
    default:
      return;
  }
}

void ProxyExchange::process_head() {
  std::string_view data(in_.get(), in_len_);
  if (tunnel_ && data.size() >= 12 && data.starts_with("HTTP/1.") && data.substr(8, 4) == " 101") {
    // The response parser refuses 101 (it never asks to upgrade); this one we asked for.
    size_t end = data.find("\r\n\r\n");
    size_t head_end = end == std::string_view::npos ? end : end + 4;
    if (head_end == std::string_view::npos) {
      end = data.find("\n\n");
      if (end != std::string_view::npos) head_end = end + 2;
    }
    if (head_end == std::string_view::npos) return;  // more to come
    start_tunnel(data.substr(0, head_end), head_end);
    return;
  }
  http1::ResponseParser::Result r = parser_.parse(data);
  if (r.status == http1::ResponseParser::Status::kError && r.consumed == 0) {
    // Most likely bytes the back end sent after its previous response on this pooled
    // connection (a body to a HEAD, say): a fresh connection gets a clean answer.
    if (!write_broken_ && conn_->reused()) {
      log_failure("pooled connection carried an invalid response; retrying on a new one",
                  parser_.error());
      if (retry_on_fresh_connection()) return;
    }
    fail(upstream::Failure::kMalformed, "invalid response", parser_.error());
    return;
  }
  if (!parser_.head_complete()) return;  // more to come
  const http1::ResponseHead& head = parser_.head();
  in_off_ = head.interim_bytes + head.head_bytes;
  start_response();
}

// `fields`: the response's fields but for those the connection sets (the handler's scratch: one
// worker thread, no exchange re-enters this).
void ProxyExchange::fill_response_headers(std::vector<HeaderView>& fields, bool tunnel) {
  ResponseOptions& options = handler_.response_options_;
  options.client_origin.assign("http://");
  options.client_origin.append(request_.host.empty() ? std::string_view("localhost")
                                                     : request_.host);
  const std::string& address_origin = handler_.server_origins_[server_];
  // The common case: no rule, nothing to rewrite. The lines were validated by the response
  // parser, so they go out as they are, without one allocation per header.
  header_block_.clear();
  if ((!options.rewrite_location || address_origin.empty() || !has_location_or_refresh(fields)) &&
      append_response_headers_fast(header_block_, fields, options, tunnel)) {
    response_.set_prebuilt_headers(header_block_);
    return;
  }
  HeaderList headers = rewrite_response_headers(fields, options, tunnel);

  // A back end that names itself by its address rather than by the name we sent is rewritten
  // too.
  if (options.rewrite_location && !address_origin.empty()) {
    for (Header& h : headers) {
      if (ascii_iequals(h.name, "Location")) {
        if (auto url = rewrite_url(h.value, address_origin, options.client_origin)) h.value = *url;
      } else if (ascii_iequals(h.name, "Refresh")) {
        if (auto value = rewrite_refresh(h.value, address_origin, options.client_origin))
          h.value = *value;
      }
    }
  }
  for (const Header& h : headers) response_.add_header(h.name, h.value);
}

void ProxyExchange::start_response() {
  const http1::ResponseHead& h = parser_.head();
  head_received_ = true;
  status_ = h.status;
  note_upstream(h.status);
  framing_ = parser_.framing();
  const uint64_t length =
      framing_ == http1::BodyFraming::kLength ? static_cast<uint64_t>(h.content_length) : 0;
  body_reader_.start(framing_, length);
  keep_alive_ = framing_ != http1::BodyFraming::kClose &&
                !(h.transfer_encoding && h.has_content_length) && !h.connection_close &&
                (h.version_minor >= 1 || h.connection_keep_alive);
  response_.clear();
  response_.set_status(status_);
  // The parser left the fields in the handler's scratch (collect_fields, at start).
  std::erase_if(handler_.scratch_fields_,
                [](const HeaderView& h) { return http::is_set_by_connection(h.name); });
  fill_response_headers(handler_.scratch_fields_, false);

  if (handler_.options_.intercept_errors && status_ >= 400) {
    step_ = Step::kDrain;
    pump_body();
    return;
  }
  step_ = Step::kResponseBody;
  std::string_view available(in_.get() + in_off_, in_len_ - in_off_);
  uint64_t buffer_limit = handler_.options_.buffer_bytes;

  switch (framing_) {
    case http1::BodyFraming::kNone:
      if (request_.is_head() && status_ != 304) {
        // A HEAD answer keeps the length of the body it describes, or announces none when the
        // back end did not say (RFC 9110 9.3.2): never the 0 of the empty body it carries.
        streamed_ = true;
        if (!downstream_.send_head(response_, h.has_content_length ? h.content_length : -1)) {
          end();
          return;
        }
      }
      response_complete();
      return;
    case http1::BodyFraming::kLength:
      if (length <= available.size() && length <= buffer_limit) {
        response_.set_body(available.substr(0, length));
        in_off_ += length;
        response_complete();
        return;
      }
      break;
    case http1::BodyFraming::kChunked: {
      // Complete and small already? Then it gets a Content-Length like any buffered body.
      http1::ChunkedDecoder decoder;
      std::string body;
      std::string_view rest = available;
      for (;;) {
        http1::ChunkedDecoder::Result r = decoder.decode(rest);
        rest.remove_prefix(r.consumed);
        if (r.status == http1::ChunkedDecoder::Status::kData) {
          body.append(r.data);
          if (body.size() > buffer_limit) break;
          continue;
        }
        if (r.status == http1::ChunkedDecoder::Status::kDone) {
          in_off_ += available.size() - rest.size();
          response_.set_body(body);
          response_complete();
          return;
        }
        break;  // need more, or an error the streaming path reports
      }
      break;
    }
    case http1::BodyFraming::kClose:
      break;
  }

  streamed_ = true;
  if (!downstream_.send_head(
          response_, framing_ == http1::BodyFraming::kLength ? static_cast<int64_t>(length) : -1)) {
    end();
    return;
  }
  pump_body();
}

void ProxyExchange::start_tunnel(std::string_view head, size_t head_end) {
  status_ = 101;
  response_.clear();
  response_.set_status(101);
  std::vector<HeaderView>& fields = handler_.scratch_fields_;
  fields.clear();
  split_fields(head, fields);
  fill_response_headers(fields, true);
  in_off_ = head_end;
  step_ = Step::kTunnel;
  streamed_ = true;
  replayable_ = false;
  out_.erase(0, out_sent_);
  out_sent_ = 0;
  head_len_ = 0;
  if (!downstream_.send_head(response_, -1)) {
    end();
    return;
  }
  arm_io(handler_.options_.tunnel_idle_timeout.count());
  process_input();
}

bool ProxyExchange::deliver(std::string_view piece) {
  if (step_ == Step::kDrain || piece.empty()) return true;
  if ((client_full_ || spooled()) && spool_enabled()) {
    spool(piece);  // behind what already waits
    return true;
  }
  switch (downstream_.send_body(piece)) {
    case handlers::Downstream::Sent::kMore:
      return true;
    case handlers::Downstream::Sent::kFull:
      // Without room to spool, the rest of what is buffered (at most one read buffer) still
      // goes to the client's queue, but nothing more is read until it catches up.
      client_full_ = true;
      return true;
    case handlers::Downstream::Sent::kGone:
      end();
      return false;
  }
  return false;
}

bool ProxyExchange::spool_enabled() const {
  return step_ == Step::kResponseBody &&
         (handler_.options_.buffer_bytes > 0 || handler_.options_.max_temp_file_bytes > 0);
}

bool ProxyExchange::spool_has_room() const {
  if (!spool_enabled()) return false;
  bool file_active = file_read_ < file_write_;
  if (!file_active && spool_.size() - spool_off_ < handler_.options_.buffer_bytes) return true;
  return spool_fd_ != -2 && file_write_ < handler_.options_.max_temp_file_bytes;
}

void ProxyExchange::spool(std::string_view piece) {
  // Memory always holds older bytes than the file: once the file is in use, everything goes
  // there until it has drained.
  bool file_active = file_read_ < file_write_;
  uint64_t in_memory = spool_.size() - spool_off_;
  if (!file_active && in_memory + piece.size() <= handler_.options_.buffer_bytes) {
    spool_.append(piece);
    return;
  }
  // Past the limits by at most this piece: reading stops now (reading_paused()).
  bool file_allowed = spool_fd_ != -2 && (file_active || file_write_ + piece.size() <=
                                                             handler_.options_.max_temp_file_bytes);
  if (file_allowed && spool_to_file(piece)) return;
  if (file_active) {
    fail(upstream::Failure::kReset, "cannot buffer the response for a slow client");
    return;
  }
  spool_.append(piece);
}

bool ProxyExchange::spool_to_file(std::string_view piece) {
  if (spool_fd_ == -1) {
    spool_fd_ = ::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (spool_fd_ < 0) {
      // Not every file system has O_TMPFILE: an unlinked named file does the same.
      char name[] = "/tmp/peregrine-proxy-XXXXXX";
      spool_fd_ = mkostemp(name, O_CLOEXEC);
      if (spool_fd_ >= 0) ::unlink(name);
    }
    if (spool_fd_ < 0) {
      LOG_ERROR("proxy: cannot create a temporary file in /tmp to buffer a response: %s",
                std::strerror(errno));
      spool_fd_ = -2;  // do not try again for this response
      return false;
    }
  }
  while (!piece.empty()) {
    ssize_t n = ::pwrite(spool_fd_, piece.data(), piece.size(), static_cast<off_t>(file_write_));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      LOG_ERROR("proxy: writing the response buffer file failed: %s",
                n < 0 ? std::strerror(errno) : "no space");
      ::close(spool_fd_);
      spool_fd_ = -2;
      return false;
    }
    file_write_ += static_cast<uint64_t>(n);
    piece.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Sends spooled bytes until the client is full again or the spool is empty.
void ProxyExchange::drain_spool() {
  while (!done() && !client_full_ && spooled()) {
    std::string_view piece;
    bool from_memory = spool_off_ < spool_.size();
    if (from_memory) {
      piece = std::string_view(spool_).substr(spool_off_, kReadBufferBytes);
    } else {
      if (!file_scratch_) file_scratch_ = std::make_unique<char[]>(kReadBufferBytes);
      uint64_t want = file_write_ - file_read_;
      if (want > kReadBufferBytes) want = kReadBufferBytes;
      ssize_t n = ::pread(spool_fd_, file_scratch_.get(), want, static_cast<off_t>(file_read_));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fail(upstream::Failure::kReset, "reading the response buffer file failed",
             n < 0 ? std::strerror(errno) : "short file");
        return;
      }
      piece = std::string_view(file_scratch_.get(), static_cast<size_t>(n));
    }
    handlers::Downstream::Sent sent = downstream_.send_body(piece);
    if (from_memory) {
      spool_off_ += piece.size();
      if (spool_off_ == spool_.size()) {
        spool_.clear();
        spool_off_ = 0;
      }
    } else {
      file_read_ += piece.size();
      if (file_read_ == file_write_) file_read_ = file_write_ = 0;  // reuse the file from 0
    }
    if (sent == handlers::Downstream::Sent::kGone) {
      end();
      return;
    }
    if (sent == handlers::Downstream::Sent::kFull) client_full_ = true;
  }
  if (!done() && step_ == Step::kSpoolDrain && !spooled()) {
    downstream_.finish();
    end();
  }
}

void ProxyExchange::pump_body() {
  while (!done()) {
    std::string_view available(in_.get() + in_off_, in_len_ - in_off_);
    const size_t before = available.size();
    std::string_view piece;
    const BodyReader::Event event = body_reader_.next(available, piece);
    in_off_ += before - available.size();
    switch (event) {
      case BodyReader::Event::kData:
        if (!deliver(piece)) return;
        continue;
      case BodyReader::Event::kEnd:
        response_complete();
        return;
      case BodyReader::Event::kNeedMore:
        return;
      case BodyReader::Event::kError:
        fail(upstream::Failure::kMalformed, "invalid response", "malformed chunked body");
        return;
    }
  }
}

void ProxyExchange::response_complete() {
  // Reusable only when the exchange on it was complete in both directions and nothing extra
  // arrived after the response.
  bool pool = conn_ && keep_alive_ && in_off_ == in_len_ && request_done_ && !write_broken_ &&
              out_sent_ == out_.size() && step_ != Step::kTunnel;
  complete_upstream(pool);
  if (step_ == Step::kResponseBody && spooled()) {
    // The back end is done and free; the client still has the spool to take.
    step_ = Step::kSpoolDrain;
    if (!client_full_) drain_spool();
    return;
  }
  if (step_ == Step::kDrain) {
    // Only the status: the connection adds the site's error page.
    response_.clear();
    response_.set_status(status_);
    downstream_.respond(response_);
  } else if (streamed_) {
    downstream_.finish();
  } else {
    downstream_.respond(response_);
  }
  end();
}

void ProxyExchange::upstream_eof() {
  switch (step_) {
    case Step::kRequest:
      if (!got_byte_) {  // a stale pooled connection is retried on a fresh one (fail())
        fail(upstream::Failure::kReset, "closed the connection without a response");
        return;
      }
      if (parser_.finish().status == http1::ResponseParser::Status::kDone) {
        // Unreachable in practice (a head is needed first), kept for completeness.
        fail(upstream::Failure::kMalformed, "invalid response", "empty response");
        return;
      }
      fail(upstream::Failure::kReset, "closed the connection in the response head");
      return;
    case Step::kResponseBody:
      if (framing_ == http1::BodyFraming::kClose) {
        keep_alive_ = false;
        response_complete();
        return;
      }
      fail(upstream::Failure::kReset, "closed the connection before the end of the response body");
      return;
    case Step::kDrain:
      keep_alive_ = false;
      response_complete();
      return;
    case Step::kTunnel:
      end_tunnel(0);
      return;
    case Step::kSpoolDrain:
      return;
  }
}

// ---------------------------------------------------------------------------------------------
// The handler.

ProxyHandler::ProxyHandler(const ProxyOptions& options, upstream::GroupRuntime& group,
                           event::Poller& poller, event::TimerSet& timers, const Clock& clock)
    : options_(options), group_(group), poller_(poller), timers_(timers), clock_(clock) {
  const ProxyOptions& o = options_;
  switch (o.host_mode) {
    case ProxyHostMode::kPass:
      request_options_.host_mode = HostMode::kPass;
      break;
    case ProxyHostMode::kUpstream:
      request_options_.host_mode = HostMode::kUpstream;
      break;
    case ProxyHostMode::kFixed:
      request_options_.host_mode = HostMode::kFixed;
      request_options_.fixed_host = o.fixed_host;
      break;
  }
  request_options_.forwarding.x_forwarded_for = o.x_forwarded_for;
  request_options_.forwarding.x_forwarded_proto = o.x_forwarded_proto;
  request_options_.forwarding.x_forwarded_host = o.x_forwarded_host;
  request_options_.forwarding.x_real_ip = o.x_real_ip;
  request_options_.forwarding.forwarded = o.forwarded;
  request_options_.rules = make_rules(o.request_remove, o.request_set, o.request_add);
  response_options_.rules = make_rules(o.response_remove, o.response_set, o.response_add);
  response_options_.rewrite_location = o.rewrite_location;
  response_options_.rewrite_refresh = o.rewrite_location;

  // The back end is addressed by the name in the proxy URL (nginx's $proxy_host): the group's
  // name, which for "http://127.0.0.1:8080" is the address itself.
  const config::UpstreamGroup& g = group_.config();
  upstream_host_ = g.name;
  if ((upstream_host_.empty() || upstream_host_.find('/') != std::string::npos) &&
      !g.servers.empty())
    upstream_host_ = g.servers[0].address;
  if (upstream_host_.starts_with("unix:")) upstream_host_ = "localhost";
  // The back end's own origin in the Location headers it sends: https for a TLS group.
  const std::string scheme = g.tls.enabled ? "https://" : "http://";
  response_options_.upstream_origin = scheme + upstream_host_;
  // Origins of servers whose address differs from the name the back end is addressed by.
  for (const config::UpstreamServer& server : g.servers) {
    bool distinct = server.address != upstream_host_ && !server.address.starts_with("unix:");
    server_origins_.push_back(distinct ? scheme + server.address : std::string());
  }

  map_path_ = !o.path_prefix.empty() && (o.strip_prefix || !o.path.empty());
}

std::unique_ptr<char[]> ProxyHandler::take_buffer() {
  if (spare_buffers_.empty()) return std::make_unique<char[]>(kReadBufferBytes);
  std::unique_ptr<char[]> buffer = std::move(spare_buffers_.back());
  spare_buffers_.pop_back();
  return buffer;
}

void ProxyHandler::give_back_buffer(std::unique_ptr<char[]> buffer) {
  constexpr size_t kMaxSpareBuffers = 32;  // 2 MB per worker and route at most
  if (spare_buffers_.size() < kMaxSpareBuffers) spare_buffers_.push_back(std::move(buffer));
}

handlers::Exchange* ProxyHandler::start(const Request& request, handlers::Downstream& downstream) {
  if (request.upgrade && options_.websocket && request.has_body()) {
    // A tunnelled request's body and the tunnel's bytes would share one byte stream, and only
    // the back end would decide where one ends: a body that is itself a request becomes a
    // second request that no route rule saw. No upgrade protocol in use sends a body (RFC 6455
    // 4.1: a GET), so refuse it rather than forward it and hope the back end agrees.
    LOG_INFO("client sent a bad request (400): an Upgrade request with a body, client: %s",
             peer_address(request.peer).c_str());
    downstream.fail(400);
    return nullptr;
  }
  auto* exchange = new ProxyExchange(*this, request, downstream);
  if (!exchange->begin()) return nullptr;  // already answered; disposed after this batch
  return exchange;
}

}  // namespace peregrine::proxy
