#include "admin/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "config/listen_address.h"

namespace peregrine::admin {

namespace {

const std::vector<std::string_view> kAdminKeys = {"listen", "auth", "token_file", "hosts"};

std::string trim(std::string text) {
  const char* space = " \t\r\n";
  size_t begin = text.find_first_not_of(space);
  if (begin == std::string::npos) return {};
  size_t end = text.find_last_not_of(space);
  return text.substr(begin, end - begin + 1);
}

}  // namespace

bool is_local_listener(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_UNIX) return true;
  if (addr.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(addr);
    return (ntohl(v4.sin_addr.s_addr) >> 24) == 127;
  }
  if (addr.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(addr);
    if (IN6_IS_ADDR_LOOPBACK(&v6.sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr) && v6.sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

std::string random_token() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return {};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 15]);
  }
  return token;
}

void read_admin(config::Reader& reader, const toml::node& node, config::Config* config,
                const std::string& generated_token) {
  const toml::table* table = node.as_table();
  if (!table) {
    reader.type_error(node, "admin", "a table", "write an [admin] section");
    return;
  }
  reader.check_keys(*table, kAdminKeys, "[admin]");
  admin::Options& options = config->admin;

  config::ListenAddress address;
  const toml::node* listen = table->get("listen");
  if (!listen) {
    reader.error(node.source(), "[admin] needs 'listen'",
                 "e.g. listen = \"127.0.0.1:9090\" or \"unix:/run/peregrine-admin.sock\"");
    return;
  }
  std::string text;
  if (!reader.read_string(*listen, "admin.listen", &text, false)) return;
  std::string message, hint;
  if (!config::parse_listen_address(text, &address, &message, &hint)) {
    reader.error(listen->source(), "admin.listen: " + message, hint);
    return;
  }
  address.pos = reader.pos_of(listen->source());
  address.admin = true;
  if (config::endpoint_port(address.addr) != 0 || address.addr.ss_family == AF_UNIX) {
    for (const config::ListenAddress& other : config->listen) {
      if (config::same_endpoint(other.addr, address.addr)) {
        reader.error(listen->source(), "admin.listen '" + text + "' is also a site listener",
                     "give the admin its own address, e.g. \"127.0.0.1:9090\"");
        return;
      }
    }
  }

  if (const toml::node* auth = table->get("auth")) {
    std::string value;
    if (reader.read_string(*auth, "admin.auth", &value)) {
      if (value == "token") {
        options.auth = Auth::kToken;
      } else if (value == "none") {
        options.auth = Auth::kNone;
        if (!is_local_listener(address.addr))
          reader.error(auth->source(),
                       "auth = \"none\" is refused on '" + text +
                           "': anyone who can reach it could read the server's figures",
                       "listen on 127.0.0.1, [::1] or a unix: socket, or use token_file");
      } else {
        reader.error(auth->source(),
                     "admin.auth must be \"token\" or \"none\", not \"" + value + "\"",
                     "auth = \"token\" reads the token from token_file");
      }
    }
  }
  if (const toml::node* file = table->get("token_file")) {
    if (reader.read_string(*file, "admin.token_file", &options.token_file, false)) {
      std::string path = options.token_file;
      if (!path.starts_with('/')) path = reader.base_dir() + "/" + path;
      std::ifstream in(path);
      if (!in) {
        reader.error(
            file->source(),
            "cannot read admin.token_file '" + options.token_file + "': " + std::strerror(errno),
            reader.relative_hint(options.token_file));
      } else {
        std::stringstream content;
        content << in.rdbuf();
        options.token = trim(content.str());
        if (options.token.size() < 16)
          reader.error(
              file->source(),
              "admin.token_file '" + options.token_file + "' holds " +
                  (options.token.empty()
                       ? std::string("no token")
                       : "a token of " + std::to_string(options.token.size()) + " characters"),
              "put at least 16 random characters in it, e.g. "
              "openssl rand -hex 32 > " +
                  options.token_file);
        struct stat st;
        if (stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH))
          reader.warn(reader.pos_of(file->source()),
                      "admin.token_file '" + options.token_file + "' is readable by every user",
                      "chmod o-r " + options.token_file);
      }
    }
  } else if (options.auth == Auth::kToken) {
    if (!generated_token.empty()) {
      options.token = generated_token;
    } else {
      reader.error(node.source(), "[admin] needs token_file (or auth = \"none\")",
                   "token_file = \"/etc/peregrine/admin.token\" holding a random token "
                   "(openssl rand -hex 32)");
    }
  }
  if (const toml::node* hosts = table->get("hosts")) {
    std::vector<std::pair<std::string, const toml::node*>> names;
    if (reader.read_string_list(*hosts, "admin.hosts", &names))
      for (auto& [name, where] : names) {
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        options.hosts.push_back(std::move(name));
      }
  }
  options.enabled = true;
  config->listen.push_back(std::move(address));
}

}  // namespace peregrine::admin
