// An AJP13 route's options (Tomcat's AJP connector); see docs/ajp.md.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"

namespace peregrine::ajp {

struct AjpOptions : config::HandlerOptions {
  std::string upstream;  // group name in Config::upstreams
  // Sent with every request; Tomcat's connector rejects requests without its `secret` (403).
  // Empty only with ajp_secret_required = false.
  std::string secret;
  uint32_t packet_size = 8192;        // the connector's packetSize, 8 KiB .. 64 KiB
  uint64_t buffer_bytes = 64 * 1024;  // responses up to this get a Content-Length; larger stream
  // A pooled connection idle longer than this is checked with CPING before it carries a request;
  // 0 = never.
  config::Millis cping_after{5'000};
  config::Millis cping_timeout{2'000};
};

}  // namespace peregrine::ajp
