// The command line every example takes: --listen ADDR (repeatable; 127.0.0.1:8080 when absent)
// and --workers N (0, the default: one per core). Other "--name value" pairs are returned for
// the example to read.
#pragma once

#include <cstdlib>
#include <map>
#include <string>

#include "peregrine/server.h"

namespace examples {

inline std::map<std::string, std::string> apply_command_line(peregrine::Server& server, int argc,
                                                             char** argv) {
  std::map<std::string, std::string> other;
  bool listened = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string name = argv[i];
    if (name == "--listen") {
      server.listen(argv[i + 1]);
      listened = true;
    } else if (name == "--workers") {
      server.workers(std::atoi(argv[i + 1]));
    } else {
      other[name] = argv[i + 1];
    }
  }
  if (!listened) server.listen("127.0.0.1:8080");
  return other;
}

}  // namespace examples
