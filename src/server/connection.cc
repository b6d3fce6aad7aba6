#include "server/connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/log.h"
#include "core/strings.h"
#include "http/path.h"
#include "http/router.h"
#include "http/status.h"
#include "server/worker.h"

namespace peregrine::server {

// A request whose handler wants the body: the head stays in the read buffer (the request's
// views point there) while the body accumulates here, bounded by max_body_bytes.
struct BodyWait {
  Request request;
  Ref<RouteTable> routes;  // keeps the site and route alive across a reload
  SiteRuntime* site = nullptr;
  const RouteRuntime* route = nullptr;  // null: no route matched (404 once the body is read)
  bool keep = false;                    // the handler wants the body; otherwise it is dropped
  std::string body;
  uint64_t received = 0;
  uint64_t remaining = 0;  // Content-Length bodies
  uint32_t origin = 0;     // where the body's bytes start in the read buffer (after the head)
};

namespace {

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::string_view kTimeoutResponse =
    "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";

// "HTTP/1.1 200 OK\r\n" for every status, built once: one append per response instead of four.
std::string_view status_line(int status) {
  static const std::vector<std::string> lines = [] {
    std::vector<std::string> all(600);
    for (int code = 100; code < 600; ++code)
      all[static_cast<size_t>(code)] = "HTTP/1.1 " + std::to_string(code) + " " +
                                       std::string(http::reason_phrase(code)) + "\r\n";
    return all;
  }();
  if (status < 100 || status > 599) status = 500;
  return lines[static_cast<size_t>(status)];
}

bool status_has_body(int status) {
  return status >= 200 && status != 204 && status != 304;
}

void default_error_body(Response& response) {
  int status = response.status();
  std::string_view reason = http::reason_phrase(status);
  std::string body = "<!DOCTYPE html>\n<html><head><title>";
  append_decimal(body, static_cast<uint64_t>(status));
  body.append(" ").append(reason).append("</title></head><body><h1>");
  append_decimal(body, static_cast<uint64_t>(status));
  body.append(" ").append(reason).append("</h1></body></html>\n");
  response.set_content_type("text/html; charset=utf-8");
  response.set_body(body);
}

}  // namespace

Connection::Connection(Worker& worker, int fd, const sockaddr* peer, socklen_t peer_len)
    : worker_(worker),
      fd_(fd),
      parser_(http1::ParserLimits{
          .max_head_bytes = worker.limits().max_header_bytes,
          .max_target_bytes = std::min<size_t>(8192, worker.limits().max_header_bytes)}) {
  timer.owner = this;
  peer_len_ = std::min<socklen_t>(peer_len, sizeof peer_);
  std::memcpy(&peer_, peer, peer_len_);
}

Connection::~Connection() = default;

void Connection::start() {
  on_readable();
}

void Connection::on_ready(uint32_t readiness) {
  if (state_ == State::kClosed) return;
  if ((readiness & event::kOut) && pending_) {
    flush();
    if (state_ == State::kClosed || pending_) return;
    // Output drained: answer requests that arrived meanwhile, then read what is waiting.
    if (state_ != State::kLinger) process();
    if (state_ == State::kClosed || pending_) return;
    if (read_blocked_ || (readiness & (event::kIn | event::kHangup))) {
      read_blocked_ = false;
      on_readable();
    } else {
      become_idle_or_wait();
    }
    return;
  }
  if (readiness & (event::kIn | event::kHangup)) on_readable();
}

void Connection::on_readable() {
  const size_t capacity = worker_.buffers().buffer_size();
  for (;;) {
    if (state_ == State::kClosed) return;
    if (pending_) {  // back-pressure: read no more until the client takes what we wrote
      read_blocked_ = true;
      return;
    }
    if (state_ == State::kLinger) {
      char sink[4096];
      ssize_t n;
      while ((n = ::read(fd_, sink, sizeof sink)) > 0) {
      }
      if (n == 0 || errno != EAGAIN) close_now();
      return;
    }
    if (!buffer_) buffer_ = worker_.buffers().acquire();
    if (end_ == capacity && state_ == State::kHead && start_ > 0) {
      std::memmove(buffer_, buffer_ + start_, end_ - start_);
      end_ -= start_;
      start_ = 0;
    }
    size_t space = capacity - end_;
    if (space == 0) {  // a head larger than the buffer: the parser's limit is smaller, so 431
      respond_error(431, nullptr, nullptr);
      return;
    }
    ssize_t n = ::read(fd_, buffer_ + end_, space);
    if (n > 0) {
      end_ += static_cast<uint32_t>(n);
      process();
      if (static_cast<size_t>(n) < space)
        break;  // short read: the socket is drained (edge-triggered)
      continue;
    }
    if (n == 0) {
      peer_closed_ = true;
      if (pending_) {
        keep_alive_ = false;  // finish writing, then close
        return;
      }
      close_now();
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) break;
    close_now();
    return;
  }
  become_idle_or_wait();
}

void Connection::process() {
  while (state_ != State::kClosed && state_ != State::kLinger && !pending_) {
    bool progressed = false;
    switch (state_) {
      case State::kHead:
        progressed = process_head();
        break;
      case State::kBody:
        progressed = process_body();
        break;
      default:
        break;
    }
    if (!progressed || !keep_alive_) break;
    // Many pipelined responses: send what we have so the scratch buffer stays small.
    if (worker_.scratch_output().bytes().size() > 64 * 1024) flush();
  }
  if (state_ == State::kClosed || pending_) return;
  if (!worker_.scratch_output().empty()) {
    flush();
    if (state_ == State::kClosed || pending_) return;
  }
  if (!keep_alive_ && state_ != State::kLinger && state_ != State::kBody) finish_closing();
}

bool Connection::process_head() {
  if (start_ == end_) return false;
  Request& request = worker_.scratch_request();
  request.clear();
  http1::ParseResult result =
      parser_.parse(std::string_view(buffer_ + start_, end_ - start_), request);
  switch (result.status) {
    case http1::ParseStatus::kNeedMore:
      if (timer.list != &worker_.header_timers) set_timer(worker_.header_timers);
      return false;
    case http1::ParseStatus::kError: {
      LOG_INFO("client sent a bad request (%d): %s", result.error_status, result.error_reason);
      start_ = end_;  // nothing after a bad head can be trusted
      respond_error(result.error_status, nullptr, nullptr);
      return false;
    }
    case http1::ParseStatus::kDone:
      handle_request(result.head_length);
      return true;
  }
  return false;
}

void Connection::handle_request(size_t head_length) {
  Request& request = worker_.scratch_request();
  parser_.reset();
  start_ += static_cast<uint32_t>(head_length);
  ++requests_;
  request.peer = &peer_.sa;
  request.peer_len = peer_len_;

  SiteRuntime& site = worker_.routes().site_for(request.host);
  if (request.target == "*") {
    request.path = "*";
  } else if (http::path_is_normal(request.raw_path)) {
    request.path = request.raw_path;
  } else if (http::normalize_path(request.raw_path, request.path_storage) !=
             http::PathStatus::kOk) {
    respond_error(400, &request, &site);
    return;
  } else {
    request.path = request.path_storage;
  }
  if (request.method == Method::kUnknown) {
    respond_error(501, &request, &site);
    return;
  }
  if (request.content_length > 0 &&
      static_cast<uint64_t>(request.content_length) > worker_.limits().max_body_bytes) {
    respond_error(413, &request, &site);
    return;
  }
  const RouteRuntime* route = nullptr;
  if (request.target != "*") {
    for (const RouteRuntime& candidate : site.routes) {
      if (http::route_matches(*candidate.config, request.path)) {
        route = &candidate;
        break;
      }
    }
  }
  if (!request.has_body()) {
    dispatch(request, site, route);
    return;
  }
  const bool keep_body = route && route->handler->wants_body();
  if (request.expect_continue && start_ == end_ && !keep_body) {
    // RFC 9110 10.1.1: answer at once instead of inviting a body nobody will read, and close,
    // since the client may send it anyway.
    keep_alive_ = false;
    linger_on_close_ = true;
    dispatch(request, site, route);
    return;
  }
  // The whole body is read before the handler runs, kept for a handler that wants it and
  // dropped otherwise: framing errors and oversized bodies get their 400/413, and the response
  // never races a client that is still sending.
  body_wait_ = std::make_unique<BodyWait>();
  body_wait_->request = request;
  if (request.path.data() == request.path_storage.data())  // re-point at the copy's storage
    body_wait_->request.path = body_wait_->request.path_storage;
  body_wait_->routes = worker_.routes_ref();
  body_wait_->site = &site;
  body_wait_->route = route;
  body_wait_->keep = keep_body;
  body_wait_->origin = start_;
  body_wait_->remaining = request.chunked ? 0 : static_cast<uint64_t>(request.content_length);
  if (request.chunked) chunked_ = std::make_unique<http1::ChunkedDecoder>();
  if (request.expect_continue && start_ == end_) worker_.scratch_output().append(kContinue);
  state_ = State::kBody;
}

void Connection::dispatch(Request& request, SiteRuntime& site, const RouteRuntime* route) {
  Response& response = worker_.scratch_response();
  response.clear();
  if (request.target == "*") {  // OPTIONS * asks about the server as a whole
    response.set_status(204);
    response.add_header("Allow", "GET, HEAD, POST, PUT, DELETE, OPTIONS");
  } else if (!route) {
    response.set_status(404);
  } else if (!route->config->methods.empty() &&
             std::find(route->config->methods.begin(), route->config->methods.end(),
                       request.method_text) == route->config->methods.end()) {
    std::string allow;
    for (const std::string& m : route->config->methods)
      allow.append(allow.empty() ? "" : ", ").append(m);
    response.set_status(405);
    response.add_header("Allow", allow);
  } else {
    route->handler->handle(request, response);
  }
  finish_response(request, response, &site);
}

bool Connection::process_body() {
  BodyWait& wait = *body_wait_;
  const uint64_t limit = worker_.limits().max_body_bytes;
  bool complete = false;
  int error = 0;
  while (start_ < end_ && !complete) {
    std::string_view input(buffer_ + start_, end_ - start_);
    std::string_view data;
    if (chunked_) {
      http1::ChunkedDecoder::Result r = chunked_->decode(input);
      start_ += static_cast<uint32_t>(r.consumed);
      if (r.status == http1::ChunkedDecoder::Status::kError) {
        error = 400;
        break;
      }
      data = r.data;
      if (r.status == http1::ChunkedDecoder::Status::kDone) complete = true;
      if (r.consumed == 0 && r.status == http1::ChunkedDecoder::Status::kNeedMore) break;
    } else {
      size_t take = static_cast<size_t>(std::min<uint64_t>(input.size(), wait.remaining));
      data = input.substr(0, take);
      start_ += static_cast<uint32_t>(take);
      wait.remaining -= take;
      complete = wait.remaining == 0;
    }
    wait.received += data.size();
    if (wait.received > limit) {
      error = 413;
      break;
    }
    if (wait.keep) wait.body.append(data);
  }
  if (error) {
    std::unique_ptr<BodyWait> failed = std::move(body_wait_);
    chunked_.reset();
    state_ = State::kHead;
    respond_error(error, &failed->request, failed->site);
    return false;
  }
  if (!complete) {
    // The head must stay where it is (the request points into it): move what the decoder has
    // not taken yet (a partial chunk-size line) back to the start of the space after it.
    uint32_t left = end_ - start_;
    if (start_ != wait.origin) std::memmove(buffer_ + wait.origin, buffer_ + start_, left);
    start_ = wait.origin;
    end_ = wait.origin + left;
    set_timer(worker_.body_timers);
    return false;
  }
  std::unique_ptr<BodyWait> done = std::move(body_wait_);
  chunked_.reset();
  state_ = State::kHead;
  done->request.body = done->body;
  dispatch(done->request, *done->site, done->route);
  return true;
}

void Connection::respond_error(int status, const Request* request, SiteRuntime* site) {
  Response& response = worker_.scratch_response();
  response.clear();
  response.set_status(status);
  // Framing errors leave the stream unsynchronized, and a body we refuse is still on its way.
  if (status == 400 || status == 408 || status == 413 || status == 414 || status == 431 ||
      status == 505 || status == 417 || (status == 501 && (!request || request->has_body()))) {
    response.close_connection();
    linger_on_close_ = true;
  }
  if (request) {
    finish_response(*request, response, site);
    return;
  }
  Request& blank = worker_.scratch_request();
  blank.clear();
  blank.peer = &peer_.sa;
  blank.peer_len = peer_len_;
  blank.method_text = "-";
  blank.target = "-";
  finish_response(blank, response, &worker_.routes().default_site());
}

void Connection::finish_response(const Request& request, Response& response, SiteRuntime* site) {
  int status = response.status();
  if (status >= 400 && response.body_length() == 0) {
    bool custom = false;
    if (site && site->error_pages) {
      auto page = site->config->error_pages.find(status);
      if (page != site->config->error_pages.end())
        custom = site->error_pages->serve_error_page(page->second, status, request, response);
    }
    if (!custom) default_error_body(response);
  }
  const config::Limits& limits = worker_.limits();
  bool keep = keep_alive_ && request.keep_alive && !response.closes_connection() &&
              requests_ < limits.max_requests_per_connection && !worker_.draining() &&
              !peer_closed_;
  if (!keep) keep_alive_ = false;
  write_head(&request, response, keep);

  OutputQueue& out = worker_.scratch_output();
  if (!request.is_head() && status_has_body(status)) {
    for (const Response::Segment& s : response.segments()) {
      switch (s.kind) {
        case Response::Segment::Kind::kOwned:
          out.append(response.owned_bytes(s));
          break;
        case Response::Segment::Kind::kBorrowed:
          out.append(std::string_view(s.data, s.length));
          break;
        case Response::Segment::Kind::kFile:
          out.append_file(s.file, s.file_offset, s.length);
          break;
      }
    }
  }
  if (site && site->access_log)
    site->access_log->log(request, status, request.is_head() ? 0 : response.body_length(),
                          worker_.clock().wall_seconds);
}

void Connection::write_head(const Request* request, Response& response, bool keep_alive) {
  std::string& out = worker_.scratch_output().bytes();
  int status = response.status();
  out.append(status_line(status));
  out.append(worker_.date_and_server_lines());
  if (!keep_alive) {
    out.append("Connection: close\r\n");
  } else if (request && request->version_minor == 0) {
    out.append("Connection: keep-alive\r\n");
  }
  out.append(response.prebuilt_headers());
  out.append(response.extra_headers());
  if (status_has_body(status)) {
    out.append("Content-Length: ");
    append_decimal(out, response.body_length());
    out.append("\r\n");
  }
  out.append("\r\n");
}

void Connection::flush() {
  OutputQueue& queue = pending_ ? *pending_ : worker_.scratch_output();
  switch (queue.flush(fd_)) {
    case OutputQueue::FlushResult::kDone:
      if (pending_) {
        pending_.reset();
        event::TimerList::disarm(timer);
        if (!keep_alive_) finish_closing();
      }
      return;
    case OutputQueue::FlushResult::kBlocked:
      if (!pending_) {
        pending_ = std::make_unique<OutputQueue>();
        pending_->take_remainder(queue);
      }
      set_timer(worker_.send_timers);
      if (!ensure_registered()) close_now();
      return;
    case OutputQueue::FlushResult::kError:
      queue.clear();
      close_now();
      return;
  }
}

void Connection::become_idle_or_wait() {
  if (state_ == State::kClosed || state_ == State::kLinger || pending_) return;
  if (state_ == State::kHead && start_ == end_) {
    release_buffer();
    if (!keep_alive_) {
      finish_closing();
      return;
    }
    if (worker_.draining()) {
      close_now();
      return;
    }
    set_timer(requests_ == 0 ? worker_.header_timers : worker_.keepalive_timers);
  }
  if (!ensure_registered()) close_now();
}

void Connection::finish_closing() {
  if (state_ == State::kClosed || state_ == State::kLinger) return;
  // If the client may still be sending (an unread body, pipelined requests), closing now would
  // reset the connection and could destroy the response in flight: shut our side, then drain.
  bool unread = start_ < end_ || state_ == State::kBody || linger_on_close_;
  if (!unread || peer_closed_) {
    close_now();
    return;
  }
  ::shutdown(fd_, SHUT_WR);
  state_ = State::kLinger;
  body_wait_.reset();
  chunked_.reset();
  release_buffer();
  set_timer(worker_.linger_timers);
  if (!ensure_registered()) close_now();
}

void Connection::on_timeout() {
  if (state_ == State::kClosed) return;
  bool mid_request =
      !pending_ && ((state_ == State::kHead && start_ < end_) || state_ == State::kBody);
  if (mid_request) {
    LOG_INFO("closing a connection: the client was too slow to send its request");
    ssize_t ignored = ::send(fd_, kTimeoutResponse.data(), kTimeoutResponse.size(), MSG_NOSIGNAL);
    (void)ignored;
  }
  close_now();
}

void Connection::drain() {
  if (state_ == State::kClosed) return;
  keep_alive_ = false;
  if (state_ == State::kHead && start_ == end_ && !pending_) close_now();
}

void Connection::close_now() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  // Only the connection being processed can have bytes in the worker's scratch queue (every
  // other one flushed it before returning): they are ours and must not reach the next client.
  worker_.scratch_output().clear();
  event::TimerList::disarm(timer);
  ::close(fd_);  // also removes it from the epoll set
  release_buffer();
  pending_.reset();
  body_wait_.reset();
  chunked_.reset();
  worker_.close_connection(this);
}

bool Connection::ensure_registered() {
  if (registered_) return true;
  registered_ =
      worker_.poller().add(fd_, event::kReadable | event::kWritable | event::kEdgeTriggered, this);
  return registered_;
}

void Connection::release_buffer() {
  if (!buffer_ || state_ == State::kBody) return;
  worker_.buffers().release(buffer_);
  buffer_ = nullptr;
  start_ = end_ = 0;
}

void Connection::set_timer(event::TimerList& list) {
  list.arm(timer, worker_.clock().monotonic_ms);
}

}  // namespace peregrine::server
