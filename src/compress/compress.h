// On-the-fly compression of responses, whatever handler made them and whatever protocol the
// client speaks. Two entry points, both used by a client connection:
//  - maybe_compress(): a complete response (return routes, application handlers, buffered
//    FastCGI and proxy answers), compressed in one go, with its Content-Length.
//  - StreamSlot::wrap(): the Downstream an asynchronous handler's exchange talks to. With
//    compression off for the route it is the client's own Downstream (no allocation, no extra
//    call); otherwise a CompressingDownstream that decides on send_head() and compresses each
//    send_body() piece (the length becomes unknown: chunked on HTTP/1.1).
// Static files have their own path (handlers/static/variant_cache.h): a compressed file is
// made once and cached, not compressed per request.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "compress/coding.h"
#include "compress/encoder.h"
#include "compress/options.h"
#include "compress/response_head.h"
#include "core/spares.h"
#include "handlers/stream_handler.h"
#include "peregrine/request.h"
#include "peregrine/response.h"

namespace peregrine::compress {

// Compresses a complete response in place when the options, the request and the response allow
// it; adds Vary: Accept-Encoding when the answer depended on Accept-Encoding. Bodies sent from a
// file (sendfile regions) are left alone: the static handler has already chosen for those.
void compress_response(const Request& request, Response& response, const Options& options);
// Inline so that a route without compression pays one branch, not a call.
inline void maybe_compress(const Request& request, Response& response, const Options& options) {
  if (options.enabled) compress_response(request, response, options);
}

class CompressingDownstream final : public handlers::Downstream,
                                    public RecycledAllocation<CompressingDownstream> {
 public:
  CompressingDownstream(handlers::Downstream& client, const Request& request,
                        const Options& options);
  ~CompressingDownstream();

  // Uncompressed bytes a stream takes in between two looks at the client's queue: past them, a
  // client that still holds output makes send_body() say kFull (see send_body()).
  static constexpr size_t kInputWindow = 64 * 1024;

  void resume_body() override { client_.resume_body(); }
  void respond(Response& response) override;
  bool send_head(Response& head, int64_t content_length) override;
  Sent send_body(std::string_view bytes) override;
  Sent hold_if_queued() override { return client_.hold_if_queued(); }
  void finish() override;
  void fail(int status) override { client_.fail(status); }
  bool head_sent() const override { return client_.head_sent(); }

 private:
  handlers::Downstream& client_;
  const Request& request_;
  const Options& options_;
  std::unique_ptr<Encoder> encoder_;  // set while a body is being compressed
  bool flush_each_write_ = false;
  bool failed_ = false;
  size_t input_since_look_ = 0;  // uncompressed bytes taken since the last look at the queue
  std::string out_;
};

// Where a client connection keeps the decorator of one exchange: a member of its in-flight
// request, so the decorator lives exactly as long as the exchange may call it.
class StreamSlot {
 public:
  // The Downstream to give the exchange. A recycled owner (an HTTP/2 stream) calls it for each
  // request: the previous request's decorator, if any, goes now.
  handlers::Downstream& wrap(handlers::Downstream& client, const Request& request,
                             const Options& options) {
    if (!options.enabled) {
      if (downstream_) downstream_.reset();
      return client;
    }
    downstream_ = std::make_unique<CompressingDownstream>(client, request, options);
    return *downstream_;
  }

 private:
  std::unique_ptr<CompressingDownstream> downstream_;
};

}  // namespace peregrine::compress
