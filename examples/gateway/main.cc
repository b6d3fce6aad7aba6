// A coroutine handler that calls a back end through peregrine::HttpClient and answers with its
// result:
//
//   ANY /gateway/REST?QUERY  → the same method, REST and QUERY (and the request body) sent to
//                              BACKEND/REST?QUERY; its status, Content-Type and body come back
//                              (X-Backend-Status: its status). A failed call answers 502 (504
//                              for a timeout) with X-Client-Error naming the error.
//
//   GET /stream/REST         → the back end's answer streamed through as it arrives, at the
//                              pace the client reads it (any size: max-body does not apply)
//   GET /size/REST           → callback style: "STATUS BYTES\n" of a GET of BACKEND/REST
//
// The call is tied to the request: a client that goes away aborts the back-end call (its
// connection is closed) and the coroutine resumes with kCancelled.
//
// Usage: gateway --backend URL [--listen ADDR] [--workers N] [--connect-timeout-ms N]
//                [--read-timeout-ms N] [--timeout-ms N] [--max-body N] [--keepalive N]
//                [--max-connections N] [--tls-verify on|off] [--ca-file PEM]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "../common/command_line.h"
#include "peregrine/async.h"
#include "peregrine/http_client.h"
#include "peregrine/server.h"

namespace {

peregrine::Task forward(const peregrine::Request& request, peregrine::AsyncResponse res,
                        peregrine::HttpClient client, std::string backend) {
  // What the call needs, copied before the first co_await.
  peregrine::HttpRequest call;
  call.method = std::string(request.method_text);
  // The raw path: still percent-encoded, as it must go on the wire.
  std::string_view rest = request.raw_path.substr(std::string_view("/gateway").size());
  call.url = backend + std::string(rest.empty() ? "/" : rest);
  if (!request.query.empty()) call.url += "?" + std::string(request.query);
  if (auto type = request.header("Content-Type"))
    call.headers.emplace_back("Content-Type", std::string(*type));
  for (;;) {  // the request body, piece by piece
    peregrine::BodyPiece piece = co_await res.read();
    if (piece.cancelled) co_return;
    call.body.append(piece.bytes);
    if (piece.last) break;
  }

  peregrine::HttpResponse answer = co_await client.request(std::move(call), res);
  if (answer.error == peregrine::HttpError::kCancelled) co_return;  // the client left
  peregrine::Response& out = res.response();
  if (!answer.ok()) {
    out.set_status(answer.error == peregrine::HttpError::kTimeout ? 504 : 502);
    out.add_header("X-Client-Error", peregrine::http_error_name(answer.error));
    out.set_content_type("text/plain");
    out.set_body("gateway: " + std::string(peregrine::http_error_name(answer.error)) + ": " +
                 answer.error_text + "\n");
    res.respond();
    co_return;
  }
  out.set_status(answer.status);
  out.add_header("X-Backend-Status", std::to_string(answer.status));
  if (auto type = answer.header("Content-Type")) out.set_content_type(*type);
  out.set_body(answer.body);
  res.respond();
}

// Streaming: each piece goes on as it comes; res.write() waits while our client is slow, and
// the back end is read no faster than that.
peregrine::Task relay(const peregrine::Request& request, peregrine::AsyncResponse res,
                      peregrine::HttpClient client, std::string backend) {
  std::string url =
      backend + std::string(request.raw_path.substr(std::string_view("/stream").size()));
  if (!request.query.empty()) url += "?" + std::string(request.query);
  peregrine::HttpStream stream = client.open({"GET", url, {}, {}}, res);
  peregrine::HttpResponse head = co_await stream.head();
  if (head.error == peregrine::HttpError::kCancelled) co_return;
  if (!head.ok()) {
    res.response().add_header("X-Client-Error", peregrine::http_error_name(head.error));
    res.fail(head.error == peregrine::HttpError::kTimeout ? 504 : 502);
    co_return;
  }
  res.response().set_status(head.status);
  if (auto type = head.header("Content-Type")) res.response().set_content_type(*type);
  for (;;) {
    peregrine::HttpBodyPiece piece = co_await stream.read();
    if (piece.error != peregrine::HttpError::kNone) {
      res.fail(502);  // the head is out: the connection is closed, the client sees it cut
      co_return;
    }
    if (!piece.bytes.empty() && co_await res.write(piece.bytes) != peregrine::IoStatus::kOk)
      co_return;  // our client left: `stream` goes with the frame, aborting the call
    if (piece.last) break;
  }
  res.finish();
}

// The same client with a callback: it runs on the worker's loop once the call ended.
void size_of(const peregrine::Request& request, peregrine::AsyncResponse res,
             peregrine::HttpClient& client, const std::string& backend) {
  std::string url =
      backend + std::string(request.raw_path.substr(std::string_view("/size").size()));
  if (!request.query.empty()) url += "?" + std::string(request.query);
  client.request(
      {"GET", url, {}, {}},
      [res](peregrine::HttpResponse& answer) mutable {
        if (answer.error == peregrine::HttpError::kCancelled) return;
        res.response().set_content_type("text/plain");
        if (answer.ok()) {
          res.response().set_body(std::to_string(answer.status) + " " +
                                  std::to_string(answer.body.size()) + "\n");
        } else {
          res.response().set_status(502);
          res.response().set_body(std::string(peregrine::http_error_name(answer.error)) + "\n");
        }
        res.respond();
      },
      &res);
}

std::chrono::milliseconds millis(const std::map<std::string, std::string>& args, const char* name,
                                 std::chrono::milliseconds fallback) {
  auto it = args.find(name);
  return it == args.end() ? fallback : std::chrono::milliseconds(std::atoll(it->second.c_str()));
}

}  // namespace

int main(int argc, char** argv) {
  peregrine::Server server;
  std::map<std::string, std::string> args = examples::apply_command_line(server, argc, argv);
  auto backend = args.find("--backend");
  if (backend == args.end()) {
    std::fprintf(stderr, "usage: gateway --backend URL [--listen ADDR] [options]\n");
    return 2;
  }
  peregrine::HttpClientOptions options;
  options.connect_timeout = millis(args, "--connect-timeout-ms", options.connect_timeout);
  options.read_timeout = millis(args, "--read-timeout-ms", options.read_timeout);
  options.timeout = millis(args, "--timeout-ms", options.timeout);
  if (args.count("--max-body"))
    options.max_body_bytes = std::strtoull(args["--max-body"].c_str(), nullptr, 10);
  if (args.count("--keepalive"))
    options.keepalive = static_cast<uint32_t>(std::atoi(args["--keepalive"].c_str()));
  if (args.count("--max-connections"))
    options.max_connections = static_cast<uint32_t>(std::atoi(args["--max-connections"].c_str()));
  if (args.count("--tls-verify")) options.tls_verify = args["--tls-verify"] != "off";
  if (args.count("--ca-file")) options.ca_file = args["--ca-file"];

  // The client and the back end's URL go to the coroutine as parameters: they live in its
  // frame, not in the lambda (which a reload may free while the coroutine waits).
  peregrine::HttpClient client(options);
  std::string base = backend->second;
  while (!base.empty() && base.back() == '/') base.pop_back();
  server.route_async(
      "/gateway", [client, base](const peregrine::Request& request, peregrine::AsyncResponse res) {
        return forward(request, std::move(res), client, base);
      });
  server.route_async(
      "/stream", [client, base](const peregrine::Request& request, peregrine::AsyncResponse res) {
        return relay(request, std::move(res), client, base);
      });
  // A callback outlives this lambda's call, not the handler: it captures only `res` (and the
  // client and URL are used before handle() returns).
  server.route_async("/size", [client, base](const peregrine::Request& request,
                                             peregrine::AsyncResponse res) mutable {
    size_of(request, std::move(res), client, base);
  });
  return server.run();
}
