# Turns every file of a folder into a C++ byte array, at build time (cmake -P):
#   cmake -DSOURCE_DIR=src/admin/ui -DOUTPUT=build/.../admin_ui_assets.cc -P embed_files.cmake
# The output defines peregrine::admin::kUiAssets (admin/ui.h): each file's name, its bytes, a
# Content-Type from its extension and a strong ETag from its SHA-256. file(READ ... HEX) needs
# no xxd; the output is generated, never committed.
cmake_minimum_required(VERSION 3.20)

file(GLOB files LIST_DIRECTORIES false RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/*")
list(SORT files)
set(arrays "")
set(table "")
set(index 0)
foreach(name IN LISTS files)
  get_filename_component(ext "${name}" LAST_EXT)
  if(ext STREQUAL ".html")
    set(type "text/html; charset=utf-8")
  elseif(ext STREQUAL ".js")
    set(type "text/javascript; charset=utf-8")
  elseif(ext STREQUAL ".css")
    set(type "text/css; charset=utf-8")
  elseif(ext STREQUAL ".svg")
    set(type "image/svg+xml")
  else()
    message(FATAL_ERROR "${SOURCE_DIR}/${name}: no Content-Type known for '${ext}'")
  endif()
  file(READ "${SOURCE_DIR}/${name}" hex HEX)
  file(SHA256 "${SOURCE_DIR}/${name}" digest)
  string(SUBSTRING "${digest}" 0 20 digest)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  # 20 bytes a line, then each byte as 0xNN; a trailing 0 keeps an empty file's array legal.
  string(REGEX REPLACE "([0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f])" "\\1\n    " hex "${hex}")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND arrays "const unsigned char kFile${index}[] = {\n    ${bytes}0};\n")
  string(APPEND table "    {\"/${name}\", \"${type}\", \"\\\"${digest}\\\"\",\n"
                      "     {reinterpret_cast<const char*>(kFile${index}), ${size}}},\n")
  math(EXPR index "${index} + 1")
endforeach()
if(index EQUAL 0)
  message(FATAL_ERROR "${SOURCE_DIR}: no files to embed")
endif()

set(text "// Generated from ${SOURCE_DIR} by cmake/embed_files.cmake; do not edit.
#include \"admin/ui.h\"

namespace peregrine::admin {
namespace {
${arrays}}  // namespace

const UiAsset kUiAssets[] = {
${table}};
const size_t kUiAssetCount = ${index};

}  // namespace peregrine::admin
")
# Rewritten only when it changes, so an unchanged UI recompiles nothing.
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
  if(old STREQUAL text)
    return()
  endif()
endif()
file(WRITE "${OUTPUT}" "${text}")
