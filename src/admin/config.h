// Reading the [admin] table (and quick mode's --admin): the admin listener, its authentication
// and the Host names it answers to. See docs/admin.md.
//
//   [admin]
//   listen = "127.0.0.1:9090"          # or "unix:/run/peregrine-admin.sock"
//   token_file = "/etc/peregrine/admin.token"     # and/or:
//   password_file = "/etc/peregrine/admin.passwd" # one crypt(3) hash (yescrypt, bcrypt)
//   # auth = "none"                    # only on a loopback or unix-socket listener
//   # hosts = ["admin.example.com"]    # Host names besides localhost and IP literals
#pragma once

#include <sys/socket.h>
#include <toml++/toml.h>

#include <string>

#include "config/config.h"
#include "config/reader.h"

namespace peregrine::admin {

// Reads `node` (the [admin] table) into config->admin and appends its listener to
// config->listen. Call after the `listen` addresses are read (duplicates are checked).
// `generated_token`: quick mode's token, used when no token_file is given ("" in a file: then
// token_file is required unless auth = "none").
void read_admin(config::Reader& reader, const toml::node& node, config::Config* config,
                const std::string& generated_token = {});

// 127.0.0.0/8, ::1 (and ::ffff:127.0.0.0/104) or a unix socket.
bool is_local_listener(const sockaddr_storage& addr);

// 32 random bytes as 64 hex digits (OpenSSL's RAND_bytes); "" if the generator fails.
std::string random_token();
// Two lower-case hex digits per byte (tokens, session ids, ETags).
std::string hex_digits(const unsigned char* bytes, size_t n);

}  // namespace peregrine::admin
