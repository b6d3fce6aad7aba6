// A handler that exists only in the unit tests: `echo = "TEXT"` answers every request with TEXT
// (echo_status, 200 by default). It is written the way docs/architecture.md's "Adding a handler"
// says, to prove that the steps are all it takes: its options, reader, admin description and
// factory are one registration (echo_type()), and with_echo() is the one place it is registered.
// The server's binary never sees it: handlers::builtin() does not list it.
#pragma once

#include <string>

#include "config/handler_type.h"
#include "handlers/handler_type.h"

namespace peregrine::echo {

struct EchoOptions : config::HandlerOptions {
  std::string text;
  int status = 200;
};

const handlers::HandlerType& echo_type();

// The built-in handlers and echo, after them.
const config::HandlerSet& with_echo();

}  // namespace peregrine::echo
