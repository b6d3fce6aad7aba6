#include "compress/config.h"

#include <string>

#include "core/strings.h"

namespace peregrine::compress {
namespace {

const std::vector<std::string_view> kOptionKeys = {
    "enabled", "types", "min_length", "gzip_level", "brotli_level", "zstd_level", "order"};

void read_level(config::Reader& reader, const toml::table& table, std::string_view key,
                std::string_view name, int64_t lo, int64_t hi, int* out) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return;
  int64_t value = 0;
  if (reader.read_int(*node, std::string(name) + "." + std::string(key), lo, hi, &value))
    *out = static_cast<int>(value);
}

}  // namespace

const std::vector<std::string_view>& option_keys() {
  return kOptionKeys;
}

bool parse_coding(std::string_view text, Coding* coding) {
  if (ascii_iequals(text, "gzip")) {
    *coding = Coding::kGzip;
  } else if (ascii_iequals(text, "br") || ascii_iequals(text, "brotli")) {
    *coding = Coding::kBrotli;
  } else if (ascii_iequals(text, "zstd")) {
    *coding = Coding::kZstd;
  } else {
    return false;
  }
  return true;
}

void read_options(config::Reader& reader, const toml::node& node, std::string_view name,
                  Options* options) {
  if (node.is_boolean()) {
    reader.read_bool(node, name, &options->enabled);
    return;
  }
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    reader.type_error(node, name, "a boolean or a table",
                      "compress = true, or compress = { gzip_level = 6, min_length = 256 }");
    return;
  }
  const std::string section = "[" + std::string(name) + "]";
  reader.check_keys(*table, kOptionKeys, section);
  options->enabled = true;
  if (const toml::node* n = table->get("enabled"))
    reader.read_bool(*n, std::string(name) + ".enabled", &options->enabled);
  if (const toml::node* n = table->get("types")) {
    std::vector<std::pair<std::string, const toml::node*>> types;
    if (reader.read_string_list(*n, std::string(name) + ".types", &types)) {
      std::vector<std::string> accepted;
      for (auto& [type, element] : types) {
        const size_t slash = type.find('/');
        if (type.empty() || slash == std::string::npos || slash == 0 || slash + 1 == type.size() ||
            type.find_first_of(" ;,") != std::string::npos) {
          reader.error(element->source(), "invalid media type \"" + type + "\"",
                       "write a type/subtype such as \"application/json\", or \"text/*\"");
          continue;
        }
        accepted.push_back(type);
      }
      options->types = std::move(accepted);
    }
  }
  if (const toml::node* n = table->get("min_length")) {
    reader.read_size(*n, std::string(name) + ".min_length", 0, uint64_t{1} << 40,
                     &options->min_length);
  }
  read_level(reader, *table, "gzip_level", name, 1, 9, &options->gzip_level);
  read_level(reader, *table, "brotli_level", name, 0, 11, &options->brotli_level);
  read_level(reader, *table, "zstd_level", name, 1, 19, &options->zstd_level);
  if (const toml::node* n = table->get("order")) {
    std::vector<std::pair<std::string, const toml::node*>> names;
    if (reader.read_string_list(*n, std::string(name) + ".order", &names)) {
      std::vector<Coding> order;
      for (auto& [text, element] : names) {
        Coding coding;
        if (!parse_coding(text, &coding)) {
          reader.error(element->source(), "unknown coding \"" + text + "\"",
                       "one of: br, zstd, gzip");
          continue;
        }
        bool repeated = false;
        for (Coding c : order) repeated |= c == coding;
        if (repeated) {
          reader.error(element->source(), "coding \"" + text + "\" is listed twice");
          continue;
        }
        order.push_back(coding);
      }
      if (order.empty() && names.empty()) {
        reader.error(n->source(), "'" + std::string(name) + ".order' is empty",
                     "list the codings to offer, e.g. [\"br\", \"gzip\"], or set enabled = false");
      } else {
        options->order = std::move(order);
      }
    }
  }
}

}  // namespace peregrine::compress
