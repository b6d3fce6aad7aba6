// The AJP13 gateway to Tomcat (or any AJP13 container): forwards a request over a pooled
// connection with what AJP carries (client address and port, is_ssl, the secret), feeds the
// request body as the container asks for it (GET_BODY_CHUNK), and turns SEND_HEADERS /
// SEND_BODY_CHUNK / END_RESPONSE into the HTTP response: buffered up to `ajp_buffer` so it gets
// a Content-Length, streamed beyond. Slots, queue, retries, timeouts and pooling are the shared
// upstream exchange's (upstream/exchange.h). One instance per route per worker.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "handlers/ajp/options.h"
#include "handlers/stream_handler.h"
#include "peregrine/request.h"
#include "upstream/group_runtime.h"

namespace peregrine::ajp {

class AjpExchange;

// The jvmRoute a session id names: "ABC123.node1" -> "node1", from the JSESSIONID cookie or a
// ";jsessionid=" path parameter; "" when there is none.
std::string_view session_route(const Request& request);

class AjpHandler final : public handlers::StreamHandler {
 public:
  AjpHandler(const config::Route& route, const config::Site& site, upstream::GroupRuntime& group,
             const handlers::WorkerEnv& env);
  ~AjpHandler() override;

  handlers::Exchange* start(const Request& request, handlers::Downstream& downstream) override;

 private:
  friend class AjpExchange;
  const AjpOptions& options_;
  const config::Site& site_;
  upstream::GroupRuntime& group_;
  handlers::WorkerEnv env_;
  std::unique_ptr<char[]> read_buffer_;  // every exchange's reads; decoded before the next one
  std::vector<Header> headers_;          // the forwarded headers of the request being encoded
};

}  // namespace peregrine::ajp
