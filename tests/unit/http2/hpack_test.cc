#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "http2/hpack/decoder.h"
#include "http2/hpack/encoder.h"
#include "http2/hpack/huffman.h"
#include "http2/hpack/integer.h"
#include "http2/hpack/tables.h"

namespace peregrine::http2::hpack {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

std::string unhex(std::string_view text) {
  std::string out;
  int high = -1;
  for (char c : text) {
    if (c == ' ') continue;
    const int v = (c >= '0' && c <= '9') ? c - '0' : c - 'a' + 10;
    if (high < 0) {
      high = v;
    } else {
      out.push_back(static_cast<char>(high << 4 | v));
      high = -1;
    }
  }
  return out;
}

std::string hex(std::string_view bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

struct Decoded {
  DecodeResult result;
  Fields fields;
  std::vector<bool> never_indexed;
  std::vector<bool> valid;
};

Decoded decode(Decoder& d, std::string_view block) {
  Decoded out;
  out.result = d.decode(block, [&](const Field& f) {
    out.fields.emplace_back(std::string(f.name), std::string(f.value));
    out.never_indexed.push_back(f.never_indexed);
    out.valid.push_back(f.valid);
  });
  return out;
}

Fields table_of(const DynamicTable& t) {
  Fields out;
  for (uint32_t i = 0; i < t.count(); ++i) {
    out.emplace_back(std::string(t.get(i).name), std::string(t.get(i).value));
  }
  return out;
}

std::string encode_int(uint8_t pattern, int prefix, uint32_t value) {
  std::string out;
  encode_integer(out, pattern, prefix, value);
  return out;
}

bool decode_int(std::string_view bytes, int prefix, uint32_t& value, size_t* used = nullptr) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint8_t* start = p;
  const bool ok = decode_integer(p, p + bytes.size(), prefix, value);
  if (used) *used = static_cast<size_t>(p - start);
  return ok;
}

// RFC 7541 C.1.
TEST(HpackInteger, EncodesTheRfcExamples) {
  EXPECT_EQ(hex(encode_int(0, 5, 10)), "0a");
  EXPECT_EQ(hex(encode_int(0, 5, 1337)), "1f9a0a");
  EXPECT_EQ(hex(encode_int(0, 8, 42)), "2a");
  uint32_t v = 0;
  ASSERT_TRUE(decode_int(unhex("1f9a0a"), 5, v));
  EXPECT_EQ(v, 1337u);
}

TEST(HpackInteger, BoundariesAndOverflow) {
  for (int prefix = 1; prefix <= 8; ++prefix) {
    for (uint32_t value : {0u, (1u << prefix) - 2, (1u << prefix) - 1, 1u << prefix, 127u, 128u,
                           16383u, 16384u, kMaxInteger}) {
      const std::string bytes = encode_int(0, prefix, value);
      uint32_t back = 0;
      size_t used = 0;
      ASSERT_TRUE(decode_int(bytes, prefix, back, &used)) << prefix << " " << value;
      EXPECT_EQ(back, value);
      EXPECT_EQ(used, bytes.size());
      // Every shorter input is truncated.
      for (size_t n = 1; n < bytes.size(); ++n)
        EXPECT_FALSE(decode_int(bytes.substr(0, n), prefix, back));
    }
  }
  uint32_t v = 0;
  EXPECT_EQ(hex(encode_int(0, 5, 31)), "1f00");  // the prefix full, then a zero byte
  // kMaxInteger + 1 with a 5-bit prefix: 31 + 0x7fffffe1.
  EXPECT_FALSE(decode_int(unhex("1fe1ffffff07"), 5, v));
  EXPECT_TRUE(decode_int(unhex("1fe0ffffff07"), 5, v));
  EXPECT_EQ(v, kMaxInteger);
  EXPECT_FALSE(decode_int(unhex("1fffffffffffffff7f"), 5, v));  // far beyond 32 bits
  EXPECT_FALSE(decode_int(unhex("1f808080808000"), 5, v));      // six continuation bytes
  EXPECT_FALSE(decode_int(unhex("1f80"), 5, v));                // ends in a continuation
}

TEST(HpackHuffman, EncodesTheRfcStrings) {
  auto huff = [](std::string_view s) {
    std::string out(huffman_encoded_size(s), '\0');
    huffman_encode(s, out.data());
    return hex(out);
  };
  EXPECT_EQ(huff("www.example.com"), "f1e3c2e5f23a6ba0ab90f4ff");
  EXPECT_EQ(huff("no-cache"), "a8eb10649cbf");
  EXPECT_EQ(huff("custom-key"), "25a849e95ba97d7f");
  EXPECT_EQ(huff("custom-value"), "25a849e95bb8e8b4bf");
  EXPECT_EQ(huff("302"), "6402");
  EXPECT_EQ(huff("Mon, 21 Oct 2013 20:13:21 GMT"), "d07abe941054d444a8200595040b8166e082a62d1bff");
  EXPECT_EQ(huff(""), "");
}

bool huffman_round_trip(const std::string& text) {
  std::string encoded(huffman_encoded_size(text), '\0');
  huffman_encode(text, encoded.data());
  std::string decoded(huffman_max_decoded_size(encoded.size()), '\0');
  size_t n = 0;
  if (!huffman_decode(reinterpret_cast<const uint8_t*>(encoded.data()), encoded.size(),
                      decoded.data(), &n)) {
    return false;
  }
  decoded.resize(n);
  return decoded == text;
}

TEST(HpackHuffman, RoundTripsEveryByteAndRandomText) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  EXPECT_TRUE(huffman_round_trip(all));
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string text(rng() % 40, '\0');
    for (char& c : text) c = static_cast<char>(i % 2 ? rng() % 256 : 'a' + rng() % 26);
    ASSERT_TRUE(huffman_round_trip(text)) << hex(text);
  }
}

bool huffman_accepts(std::string_view hex_bytes, std::string* text = nullptr) {
  const std::string bytes = unhex(hex_bytes);
  std::string out(huffman_max_decoded_size(bytes.size()) + 1, '\0');
  size_t n = 0;
  const bool ok =
      huffman_decode(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), out.data(), &n);
  if (ok && text) *text = out.substr(0, n);
  return ok;
}

TEST(HpackHuffman, RejectsEosAndBadPadding) {
  std::string text;
  ASSERT_TRUE(huffman_accepts("1f", &text));  // 'a' (00011) + 3 bits of padding
  EXPECT_EQ(text, "a");
  EXPECT_TRUE(huffman_accepts("", &text));
  EXPECT_EQ(text, "");
  EXPECT_FALSE(huffman_accepts("18"));          // padding 000: not ones
  EXPECT_FALSE(huffman_accepts("1e"));          // padding 110
  EXPECT_FALSE(huffman_accepts("1fff"));        // 11 bits of padding
  EXPECT_FALSE(huffman_accepts("f8ff"));        // '&' (8 bits) + exactly 8 bits of ones
  EXPECT_FALSE(huffman_accepts("ff"));          // 8 ones alone
  EXPECT_FALSE(huffman_accepts("fffffffc"));    // EOS (30 ones) then 00
  EXPECT_FALSE(huffman_accepts("ffffffff"));    // EOS then padding
  EXPECT_FALSE(huffman_accepts("1ffffffffc"));  // 'a', then EOS inside the string
}

TEST(HpackStaticTable, FindsEveryEntry) {
  for (uint32_t i = 1; i <= kStaticTableSize; ++i) {
    const StaticMatch m = find_static(kStaticTable[i].name, kStaticTable[i].value);
    EXPECT_EQ(kStaticTable[m.name_index].name, kStaticTable[i].name) << i;
    EXPECT_TRUE(m.name_index == 1 || kStaticTable[m.name_index - 1].name != kStaticTable[i].name);
    EXPECT_EQ(m.field_index, kStaticTable[i].value.empty() ? 0 : i) << i;
  }
  EXPECT_EQ(find_static("x-custom", "1").name_index, 0u);
  EXPECT_EQ(find_static("", "").name_index, 0u);
  EXPECT_EQ(find_static(":status", "201").field_index, 0u);
  EXPECT_EQ(find_static(":status", "201").name_index, 8u);
}

// RFC 7541 C.2: one field each, with the table after it.
TEST(HpackDecoder, RfcC2FieldRepresentations) {
  {
    Decoder d;
    Decoded r = decode(d, unhex("400a637573746f6d2d6b65790d637573746f6d2d686561646572"));
    ASSERT_EQ(r.result, DecodeResult::kOk);
    EXPECT_EQ(r.fields, (Fields{{"custom-key", "custom-header"}}));
    EXPECT_EQ(table_of(d.table()), (Fields{{"custom-key", "custom-header"}}));
    EXPECT_EQ(d.table().size(), 55u);
  }
  {
    Decoder d;
    Decoded r = decode(d, unhex("040c2f73616d706c652f70617468"));
    EXPECT_EQ(r.fields, (Fields{{":path", "/sample/path"}}));
    EXPECT_FALSE(r.never_indexed[0]);
    EXPECT_EQ(d.table().count(), 0u);
  }
  {
    Decoder d;
    Decoded r = decode(d, unhex("100870617373776f726406736563726574"));
    EXPECT_EQ(r.fields, (Fields{{"password", "secret"}}));
    EXPECT_TRUE(r.never_indexed[0]);
    EXPECT_EQ(d.table().count(), 0u);
  }
  {
    Decoder d;
    Decoded r = decode(d, unhex("82"));
    EXPECT_EQ(r.fields, (Fields{{":method", "GET"}}));
    EXPECT_EQ(d.table().count(), 0u);
  }
}

struct Step {
  const char* block;
  Fields fields;
  Fields table;
  uint32_t size;
};

void run_steps(Decoder& d, const std::vector<Step>& steps) {
  for (const Step& s : steps) {
    Decoded r = decode(d, unhex(s.block));
    ASSERT_EQ(r.result, DecodeResult::kOk) << s.block;
    EXPECT_EQ(r.fields, s.fields) << s.block;
    EXPECT_EQ(table_of(d.table()), s.table) << s.block;
    EXPECT_EQ(d.table().size(), s.size) << s.block;
  }
}

const Fields kRequest1 = {
    {":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "www.example.com"}};
const Fields kRequest2 = {{":method", "GET"},
                          {":scheme", "http"},
                          {":path", "/"},
                          {":authority", "www.example.com"},
                          {"cache-control", "no-cache"}};
const Fields kRequest3 = {{":method", "GET"},
                          {":scheme", "https"},
                          {":path", "/index.html"},
                          {":authority", "www.example.com"},
                          {"custom-key", "custom-value"}};
const Fields kRequestTable3 = {{"custom-key", "custom-value"},
                               {"cache-control", "no-cache"},
                               {":authority", "www.example.com"}};

// RFC 7541 C.3 (plain) and C.4 (Huffman): three requests on one connection.
TEST(HpackDecoder, RfcC3RequestsWithoutHuffman) {
  Decoder d;
  run_steps(d, {{"828684410f7777772e6578616d706c652e636f6d",
                 kRequest1,
                 {{":authority", "www.example.com"}},
                 57},
                {"828684be58086e6f2d6361636865",
                 kRequest2,
                 {{"cache-control", "no-cache"}, {":authority", "www.example.com"}},
                 110},
                {"828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565", kRequest3,
                 kRequestTable3, 164}});
}

const char* const kC4[] = {"828684418cf1e3c2e5f23a6ba0ab90f4ff", "828684be5886a8eb10649cbf",
                           "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"};

TEST(HpackDecoder, RfcC4RequestsWithHuffman) {
  Decoder d;
  run_steps(
      d,
      {{kC4[0], kRequest1, {{":authority", "www.example.com"}}, 57},
       {kC4[1], kRequest2, {{"cache-control", "no-cache"}, {":authority", "www.example.com"}}, 110},
       {kC4[2], kRequest3, kRequestTable3, 164}});
}

// Our encoder makes the same choices as the RFC's example for these requests.
TEST(HpackEncoder, ReproducesRfcC4) {
  Encoder e;
  const Fields* lists[] = {&kRequest1, &kRequest2, &kRequest3};
  for (int i = 0; i < 3; ++i) {
    std::string out;
    for (const auto& [name, value] : *lists[i]) e.encode(out, name, value);
    EXPECT_EQ(hex(out), kC4[i]);
  }
  EXPECT_EQ(table_of(e.table()), kRequestTable3);
}

const Fields kResponse1 = {{":status", "302"},
                           {"cache-control", "private"},
                           {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                           {"location", "https://www.example.com"}};
const Fields kResponseTable1 = {{"location", "https://www.example.com"},
                                {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                {"cache-control", "private"},
                                {":status", "302"}};
const Fields kResponse2 = {{":status", "307"},
                           {"cache-control", "private"},
                           {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                           {"location", "https://www.example.com"}};
const Fields kResponseTable2 = {{":status", "307"},
                                {"location", "https://www.example.com"},
                                {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                {"cache-control", "private"}};
const Fields kResponse3 = {
    {":status", "200"},
    {"cache-control", "private"},
    {"date", "Mon, 21 Oct 2013 20:13:22 GMT"},
    {"location", "https://www.example.com"},
    {"content-encoding", "gzip"},
    {"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"}};
const Fields kResponseTable3 = {
    {"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"},
    {"content-encoding", "gzip"},
    {"date", "Mon, 21 Oct 2013 20:13:22 GMT"}};

// RFC 7541 C.5 and C.6: responses with a 256-byte table, so entries are evicted.
TEST(HpackDecoder, RfcC5ResponsesWithoutHuffman) {
  Decoder d(256);
  run_steps(
      d,
      {{"4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d"
        "546e1768747470733a2f2f7777772e6578616d706c652e636f6d",
        kResponse1, kResponseTable1, 222},
       {"4803333037c1c0bf", kResponse2, kResponseTable2, 222},
       {"88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a697077386"
        "66f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d3336"
        "30303b2076657273696f6e3d31",
        kResponse3, kResponseTable3, 215}});
}

TEST(HpackDecoder, RfcC6ResponsesWithHuffman) {
  Decoder d(256);
  run_steps(
      d, {{"488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863"
           "c78f0b97c8e9ae82ae43d3",
           kResponse1, kResponseTable1, 222},
          {"4883640effc1c0bf", kResponse2, kResponseTable2, 222},
          {"88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b3"
           "35dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007",
           kResponse3, kResponseTable3, 215}});
}

DecodeResult result_of(Decoder& d, std::string_view hex_block) {
  return decode(d, unhex(hex_block)).result;
}

TEST(HpackDecoder, MalformedBlocksAreCompressionErrors) {
  const char* const bad[] = {
      "80",          // index 0
      "be",          // index 62 with an empty table
      "ff80",        // index ends in a continuation byte
      "bf",          // index 63: prefix full, nothing follows
      "7e",          // literal, dynamic name 62 absent
      "400a637573",  // name length past the end
      "40",          // literal without its name
      "4003616263",  // name, no value
      "0003616263"
      "ff",          // value length prefix full, nothing follows
      "00816161",    // Huffman name "aa"... 0x61 is not valid padding here
      "0081ff0161",  // Huffman name of 8 ones
      "8220",        // size update after a field
      "3fe21f82",    // size update to 4097 > 4096
      "4003616263"
      "03616263"
      "3f",  // a truncated size update after a field
  };
  for (const char* block : bad) {
    Decoder d;
    EXPECT_EQ(result_of(d, block), DecodeResult::kCompressionError) << block;
  }
}

TEST(HpackDecoder, TableSizeUpdatesFollowTheSettings) {
  Decoder d;
  // Two updates at the start of a block are allowed (RFC 7541 4.2); the table empties at 0.
  ASSERT_EQ(result_of(d, "400161016282"), DecodeResult::kOk);  // a: b indexed
  EXPECT_EQ(d.table().count(), 1u);
  ASSERT_EQ(result_of(d, "203fe11f82"), DecodeResult::kOk);
  EXPECT_EQ(d.table().count(), 0u);
  EXPECT_EQ(d.table().max_size(), 4096u);
  // Our SETTINGS lowered to 100 once acknowledged: the peer must open its next block with an
  // update to at most 100.
  ASSERT_EQ(result_of(d, "400161016282"), DecodeResult::kOk);
  d.set_max_table_size(100);
  EXPECT_EQ(result_of(d, "82"), DecodeResult::kCompressionError);
  Decoder d2;
  d2.set_max_table_size(100);
  EXPECT_EQ(result_of(d2, "3f4682"), DecodeResult::kCompressionError);  // 101 > 100
  Decoder d3;
  ASSERT_EQ(result_of(d3, "400161016282"), DecodeResult::kOk);
  d3.set_max_table_size(100);
  ASSERT_EQ(result_of(d3, "3f4582"), DecodeResult::kOk);  // 100
  EXPECT_EQ(d3.table().max_size(), 100u);
  EXPECT_EQ(d3.table().count(), 1u);
  ASSERT_EQ(result_of(d3, "82"), DecodeResult::kOk);  // once is enough
  // Raising the setting obliges nothing.
  d3.set_max_table_size(8192);
  ASSERT_EQ(result_of(d3, "82"), DecodeResult::kOk);
  ASSERT_EQ(result_of(d3, "3fe13f"), DecodeResult::kOk);  // 8192 now allowed
  EXPECT_EQ(d3.table().max_size(), 8192u);
}

TEST(HpackDecoder, EvictsOldestAndCopiesANameItEvicts) {
  Decoder d(100);
  // "aaaa": "1" (37 bytes), then "bbbb": "2" (37): both fit in 100.
  ASSERT_EQ(result_of(d,
                      "4004616161610131"
                      "400462626262"
                      "0132"),
            DecodeResult::kOk);
  EXPECT_EQ(table_of(d.table()), (Fields{{"bbbb", "2"}, {"aaaa", "1"}}));
  // A third evicts "aaaa".
  ASSERT_EQ(result_of(d,
                      "400463636363"
                      "0133"),
            DecodeResult::kOk);
  EXPECT_EQ(table_of(d.table()), (Fields{{"cccc", "3"}, {"bbbb", "2"}}));
  EXPECT_EQ(d.table().size(), 74u);
  // Name from entry 63 ("bbbb", the oldest) with a value long enough to evict every entry
  // first (RFC 7541 4.4): the new entry still gets the name.
  const std::string value(60, 'v');
  std::string block("\x7f\x00", 2);  // 6-bit prefix full (63), continuation 0
  block.push_back(static_cast<char>(value.size()));
  block += value;
  Decoded r = decode(d, block);
  ASSERT_EQ(r.result, DecodeResult::kOk);
  EXPECT_EQ(r.fields, (Fields{{"bbbb", value}}));
  EXPECT_EQ(table_of(d.table()), (Fields{{"bbbb", value}}));
  // An entry larger than the table empties it and is not added.
  const std::string huge(80, 'h');
  block = "\x40\x01x";
  block.push_back(static_cast<char>(huge.size()));
  block += huge;
  r = decode(d, block);
  ASSERT_EQ(r.result, DecodeResult::kOk);
  EXPECT_EQ(r.fields, (Fields{{"x", huge}}));
  EXPECT_EQ(d.table().count(), 0u);
  EXPECT_EQ(d.table().size(), 0u);
}

// 128 empty fields of 32 bytes each fill a 4,096-byte table exactly: the ring holds them all.
TEST(HpackDecoder, FillsTheTableWithTheSmallestEntries) {
  Decoder d;
  std::string block;
  for (int i = 0; i < 130; ++i) block += std::string("\x40\x00\x00", 3);
  block += "\xbe";      // the newest
  block += "\xff\x3e";  // index 127 + 62 = 189 = 62 + 127: the oldest
  Decoded r = decode(d, block);
  ASSERT_EQ(r.result, DecodeResult::kOk);
  EXPECT_EQ(r.fields.size(), 132u);
  EXPECT_EQ(d.table().count(), 128u);
  EXPECT_EQ(d.table().size(), 4096u);
  EXPECT_EQ(result_of(d, "ff3f"), DecodeResult::kCompressionError);  // 190: one past
}

TEST(HpackDecoder, ManyInsertionsKeepTheTableExact) {
  // A model of the table (a deque of entries) against the ring and its compaction.
  Decoder d(512);
  Fields model;
  uint32_t model_size = 0;
  std::mt19937 rng(3);
  for (int i = 0; i < 3000; ++i) {
    const std::string name = "n" + std::to_string(rng() % 50);
    const std::string value(rng() % 120, static_cast<char>('a' + i % 26));
    Encoder unused;  // literal with incremental indexing, new name, raw strings
    std::string block = "\x40";
    block.push_back(static_cast<char>(name.size()));
    block += name;
    encode_integer(block, 0, 7, static_cast<uint32_t>(value.size()));
    block += value;
    ASSERT_EQ(decode(d, block).result, DecodeResult::kOk);
    const uint32_t size = static_cast<uint32_t>(name.size() + value.size() + 32);
    model.insert(model.begin(), {name, value});
    model_size += size;
    while (model_size > 512) {
      model_size -=
          static_cast<uint32_t>(model.back().first.size() + model.back().second.size() + 32);
      model.pop_back();
    }
    ASSERT_EQ(table_of(d.table()), model) << i;
    ASSERT_EQ(d.table().size(), model_size);
  }
}

// A 4000-byte entry, then thousands of one-byte references to it: tens of megabytes of fields
// from a 14 KB block. The limit stops the fields after a few; the rest is only counted.
TEST(HpackDecoder, FieldCharactersFollowRfc9113) {
  EXPECT_TRUE(valid_field(":path", "/a b"));
  EXPECT_TRUE(valid_field("x-empty", ""));
  EXPECT_TRUE(valid_field("a", "tab\tinside"));
  EXPECT_FALSE(valid_field("", "x"));
  EXPECT_FALSE(valid_field("X-Upper", "1"));
  EXPECT_FALSE(valid_field("x:colon", "1"));
  EXPECT_FALSE(valid_field("x y", "1"));
  EXPECT_FALSE(valid_field("x\x7f", "1"));
  EXPECT_FALSE(valid_field("x\x80", "1"));
  EXPECT_FALSE(valid_field("x", std::string("a\0b", 3)));
  EXPECT_FALSE(valid_field("x", "a\rb"));
  EXPECT_FALSE(valid_field("x", "a\nb"));
  EXPECT_FALSE(valid_field("x", " lead"));
  EXPECT_FALSE(valid_field("x", "trail\t"));
  // Control bytes HTTP/1.1 refuses in a value are refused here too (they would be forwarded to
  // an HTTP/1.1 back end); obs-text (0x80 and up) stays, as in HTTP/1.1.
  for (char c : {'\x01', '\x0b', '\x0c', '\x1f', '\x7f'})
    EXPECT_FALSE(valid_field("x", std::string("a") + c + "b")) << int(c);
  EXPECT_TRUE(valid_field("x", "caf\xc3\xa9"));
}

// The verdict on an indexed field is the one its literal got when it entered the table, so a
// bad field stays bad however it is referred to.
TEST(HpackDecoder, TheTableRemembersWhetherAFieldWasValid) {
  Encoder e;
  Decoder d;
  std::string block;
  e.encode(block, "x-upper", "Bad");  // a valid literal, indexed
  e.encode(block, "X-Upper", "1");    // an invalid one, indexed too
  e.encode(block, ":method", "GET");  // the static table
  e.encode(block, "x-nul", std::string("a\0", 2));
  Decoded first = decode(d, block);
  ASSERT_EQ(first.result, DecodeResult::kOk);
  EXPECT_EQ(first.valid, (std::vector<bool>{true, false, true, false}));
  block.clear();
  e.encode(block, "X-Upper", "1");
  e.encode(block, "x-upper", "Bad");
  e.encode(block, "x-nul", std::string("a\0", 2));
  ASSERT_EQ(block.size(), 3u) << "three indexed fields";
  Decoded again = decode(d, block);
  ASSERT_EQ(again.result, DecodeResult::kOk);
  EXPECT_EQ(again.valid, (std::vector<bool>{false, true, false}));
}

TEST(HpackDecoder, BombHitsTheListLimit) {
  Decoder d(4096, 16384);
  std::string block = "\x40\x01x";
  encode_integer(block, 0, 7, 4000);
  block += std::string(4000, 'b');
  block += std::string(10000, '\xbe');
  Decoded r = decode(d, block);
  EXPECT_EQ(r.result, DecodeResult::kHeaderListTooLarge);
  EXPECT_EQ(r.fields.size(), 4u);  // 4 x 4033 <= 16384 < 5 x 4033
  // The table is intact: the connection can go on.
  r = decode(d, unhex("be"));
  ASSERT_EQ(r.result, DecodeResult::kOk);
  EXPECT_EQ(r.fields, (Fields{{"x", std::string(4000, 'b')}}));
}

TEST(HpackDecoder, ListLimitIsExactAndKeepsIndexing) {
  // ":method: GET" is 7 + 3 + 32 = 42 bytes.
  Decoder d(4096, 84);
  Decoded r = decode(d, unhex("8282"));
  EXPECT_EQ(r.result, DecodeResult::kOk);
  EXPECT_EQ(r.fields.size(), 2u);
  // Over the limit: the literal after it is still added to the table.
  r = decode(d, unhex("828282"
                      "400161"
                      "0162"));
  EXPECT_EQ(r.result, DecodeResult::kHeaderListTooLarge);
  EXPECT_EQ(r.fields.size(), 2u);
  EXPECT_EQ(table_of(d.table()), (Fields{{"a", "b"}}));
  r = decode(d, unhex("be"));
  EXPECT_EQ(r.result, DecodeResult::kOk);
  EXPECT_EQ(r.fields, (Fields{{"a", "b"}}));
}

TEST(HpackEncoder, IndexesRepeatedFieldsAndHonoursSensitivity) {
  Encoder e;
  Decoder d;
  const Fields response = {{":status", "200"},
                           {"date", "Tue, 01 Dec 2026 17:00:00 GMT"},
                           {"server", "peregrine"},
                           {"content-type", "text/plain"},
                           {"content-length", "11"}};
  std::string first;
  for (const auto& [n, v] : response) e.encode(first, n, v);
  std::string second;
  for (const auto& [n, v] : response) e.encode(second, n, v);
  EXPECT_EQ(second.size(), response.size());  // one byte each
  EXPECT_EQ(decode(d, first).fields, response);
  EXPECT_EQ(decode(d, second).fields, response);

  std::string block;
  e.encode(block, "authorization", "Basic c2VjcmV0", true);
  e.encode(block, "x-token", "abc", true);
  e.encode(block, ":status", "200", true);  // sensitive even where the static table matches
  EXPECT_EQ(static_cast<uint8_t>(block[0]), 0x10 | 15);  // never indexed, name 23 (4-bit prefix)
  Decoded r = decode(d, block);
  ASSERT_EQ(r.result, DecodeResult::kOk);
  EXPECT_EQ(r.fields,
            (Fields{{"authorization", "Basic c2VjcmV0"}, {"x-token", "abc"}, {":status", "200"}}));
  EXPECT_EQ(r.never_indexed, (std::vector<bool>{true, true, true}));
  EXPECT_EQ(e.table().count(), table_of(d.table()).size());

  // Unique values are not indexed.
  const uint32_t before = e.table().count();
  block.clear();
  e.encode(block, "location", "https://example.com/a");
  e.encode(block, ":path", "/a?b");
  EXPECT_EQ(e.table().count(), before);
  EXPECT_EQ(decode(d, block).fields,
            (Fields{{"location", "https://example.com/a"}, {":path", "/a?b"}}));
  // Binary and non-Huffman-friendly values go raw when Huffman is longer.
  block.clear();
  e.encode(block, "x-bin", std::string("\x00\xff\x01\xfe", 4));
  EXPECT_EQ(decode(d, block).fields, (Fields{{"x-bin", std::string("\x00\xff\x01\xfe", 4)}}));
}

// Values that differ in one byte, wherever it is, are different entries: the index's hash
// samples only some bytes, so this is the comparison's to tell them apart.
TEST(HpackEncoder, ValuesDifferingInOneByteAreNotConfused) {
  for (size_t n = 1; n <= 40; ++n) {
    for (size_t at = 0; at < n; ++at) {
      Encoder e;
      Decoder d;
      const std::string first(n, 'a');
      std::string second = first;
      second[at] = 'b';
      std::string block;
      e.encode(block, "x-v", first);
      e.encode(block, "x-v", second);
      e.encode(block, "x-v", first);
      Decoded r = decode(d, block);
      ASSERT_EQ(r.result, DecodeResult::kOk);
      ASSERT_EQ(r.fields, (Fields{{"x-v", first}, {"x-v", second}, {"x-v", first}}))
          << n << " " << at;
    }
  }
}

TEST(HpackEncoder, SignalsThePeersTableSize) {
  Encoder e;
  Decoder d;
  std::string block;
  e.encode(block, "x-a", "1");
  ASSERT_EQ(decode(d, block).result, DecodeResult::kOk);
  // Down to 100 then up to 4096 before the next block: both sizes are signalled, lowest first.
  e.set_peer_max_table_size(100);
  e.set_peer_max_table_size(4096);
  block.clear();
  e.encode(block, "x-b", "2");
  EXPECT_EQ(hex(block.substr(0, 5)), "3f453fe11f");
  ASSERT_EQ(decode(d, block).result, DecodeResult::kOk);
  EXPECT_EQ(table_of(d.table()), table_of(e.table()));
  // Zero: nothing is indexed any more, and the decoder agrees.
  e.set_peer_max_table_size(0);
  d.set_max_table_size(0);
  block.clear();
  e.encode(block, "x-c", "3");
  EXPECT_EQ(static_cast<uint8_t>(block[0]), 0x20);
  ASSERT_EQ(decode(d, block).result, DecodeResult::kOk);
  EXPECT_EQ(e.table().count(), 0u);
  EXPECT_EQ(d.table().count(), 0u);
  // Our own cap below 4096 is announced in the first block.
  Encoder small(1024);
  block.clear();
  small.encode(block, "x-a", "1");
  EXPECT_EQ(hex(block.substr(0, 3)), "3fe107");
  // A setting equal to the current size sends nothing.
  small.set_peer_max_table_size(65536);
  block.clear();
  small.encode(block, "x-a", "1");
  EXPECT_EQ(block.size(), 1u);
}

std::string random_string(std::mt19937& rng, size_t max) {
  std::string s(rng() % (max + 1), '\0');
  const int kind = rng() % 3;
  for (char& c : s) {
    c = kind == 0   ? static_cast<char>('a' + rng() % 26)
        : kind == 1 ? static_cast<char>(' ' + rng() % 95)
                    : static_cast<char>(rng());
  }
  return s;
}

Fields random_list(std::mt19937& rng, std::vector<bool>* sensitive = nullptr) {
  static const char* const kNames[] = {":status",    ":path",   "date", "server", "content-type",
                                       "etag",       "cookie",  "x-a",  "x-b",    "accept-encoding",
                                       "set-cookie", "location"};
  static const char* const kValues[] = {"200", "/", "gzip, deflate", "text/html", "1", ""};
  Fields list;
  const int n = rng() % 12;
  for (int i = 0; i < n; ++i) {
    std::string name = rng() % 4 ? kNames[rng() % std::size(kNames)] : random_string(rng, 20);
    std::string value = rng() % 3 ? kValues[rng() % std::size(kValues)] : random_string(rng, 300);
    if (rng() % 20 == 0) value = std::string(rng() % 3000, 'z');
    list.emplace_back(std::move(name), std::move(value));
    if (sensitive) sensitive->push_back(rng() % 10 == 0);
  }
  return list;
}

TEST(HpackRoundTrip, RandomListsThroughOurEncoderAndDecoder) {
  std::mt19937 rng(11);
  for (uint32_t cap : {4096u, 256u, 0u, 65536u}) {
    Encoder e(cap);
    Decoder d(4096, 1 << 20);  // both sides start at HTTP/2's 4096
    if (cap > 4096) d.set_max_table_size(cap);
    for (int block_no = 0; block_no < 400; ++block_no) {
      if (rng() % 50 == 0) {
        const uint32_t peer = rng() % 2 ? 4096 : rng() % 5000;
        e.set_peer_max_table_size(peer);
        d.set_max_table_size(peer);
      }
      std::vector<bool> sensitive;
      const Fields list = random_list(rng, &sensitive);
      std::string block;
      for (size_t i = 0; i < list.size(); ++i) {
        e.encode(block, list[i].first, list[i].second, sensitive[i]);
      }
      const Decoded r = decode(d, block);
      ASSERT_EQ(r.result, DecodeResult::kOk) << cap << " " << block_no;
      ASSERT_EQ(r.fields, list);
      ASSERT_EQ(r.never_indexed, sensitive);
      // An empty block carries no pending size update: the tables agree after the next field.
      if (list.empty()) continue;
      ASSERT_EQ(d.table().size(), e.table().size()) << cap << " " << block_no;
      ASSERT_EQ(d.table().count(), e.table().count()) << cap << " " << block_no;
      ASSERT_TRUE(table_of(d.table()) == table_of(e.table())) << cap << " " << block_no;
    }
  }
}

// Session reuses a block while the encoder's version stays the same, which must mean the same
// list encodes to the same bytes again; and anything that changes the table changes it.
TEST(HpackEncoder, AnUnchangedVersionMeansTheSameBytesAgain) {
  std::mt19937 rng(17);
  Encoder e;
  Fields previous;
  int reused = 0;
  for (int block_no = 0; block_no < 2000; ++block_no) {
    if (rng() % 40 == 0) {
      const uint64_t before = e.version();
      const uint32_t target = std::min<uint32_t>(4096, e.table().max_size());
      const uint32_t peer = rng() % 2 ? 4096 : rng() % 5000;
      e.set_peer_max_table_size(peer);
      if (std::min(peer, 4096u) != target) {
        EXPECT_NE(e.version(), before) << block_no;
      }
    }
    // Often the list before again, as a server repeats a response head.
    const Fields list = rng() % 2 ? previous : random_list(rng);
    const uint64_t version = e.version();
    const Fields table = table_of(e.table());
    std::string block;
    for (const auto& [n, v] : list) e.encode(block, n, v);
    if (table_of(e.table()) != table) {
      ASSERT_NE(e.version(), version) << block_no;
    }
    if (e.version() == version) {
      std::string again;
      for (const auto& [n, v] : list) e.encode(again, n, v);
      ASSERT_EQ(again, block) << block_no;
      ASSERT_EQ(e.version(), version) << block_no;
      ++reused;
    }
    previous = list;
  }
  EXPECT_GT(reused, 500);
}

// Debian's python3-hpack, another implementation, on both sides (tests/unit/http2/hpack_peer.py).
TEST(HpackPeer, CrossChecksWithPythonHpack) {
  std::mt19937 rng(5);
  std::vector<Fields> lists = {
      {{":method", "GET"},
       {":path", "/11.txt"},
       {":scheme", "https"},
       {":authority", "127.0.0.1:8443"},
       {"accept", "*/*"},
       {"accept-encoding", "gzip, deflate, br"},
       {"user-agent", "h2load nghttp2/1.52.0"}},
      {{":status", "200"},
       {"date", "Tue, 01 Dec 2026 17:00:00 GMT"},
       {"server", "peregrine"},
       {"content-type", "text/plain"},
       {"etag", "\"5e-b\""},
       {"content-length", "11"}},
      {{":status", "200"}, {"date", "Tue, 01 Dec 2026 17:00:00 GMT"}, {"server", "peregrine"}},
      {{"cookie", "a=b"}, {"authorization", "Bearer xyz"}},
  };
  std::vector<std::vector<bool>> sensitive = {
      std::vector<bool>(7), std::vector<bool>(6), std::vector<bool>(3), {false, true}};
  for (int i = 0; i < 60; ++i) {
    sensitive.emplace_back();
    lists.push_back(random_list(rng, &sensitive.back()));
  }
  char dir[] = "/tmp/peregrine-hpack-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string input = std::string(dir) + "/in", output = std::string(dir) + "/out";
  {
    Encoder e;
    std::ofstream in(input);
    for (size_t l = 0; l < lists.size(); ++l) {
      in << "L\n";
      std::string block;
      for (size_t i = 0; i < lists[l].size(); ++i) {
        const auto& [name, value] = lists[l][i];
        in << "F x" << hex(name) << " x" << hex(value) << " " << (sensitive[l][i] ? 1 : 0) << "\n";
        e.encode(block, name, value, sensitive[l][i]);
      }
      in << "B x" << hex(block) << "\n";
    }
  }
  const std::string command = "/usr/bin/python3 " PEREGRINE_SOURCE_DIR
                              "/tests/unit/http2/hpack_peer.py " +
                              input + " > " + output;
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::ifstream out(output);
  std::string line;
  Decoder d;
  size_t l = 0;
  Fields python_decoded;
  std::vector<bool> python_never;
  while (std::getline(out, line)) {
    std::istringstream words(line);
    std::string kind, a, b, flag;
    words >> kind >> a >> b >> flag;
    if (kind == "D") {
      python_decoded.clear();
      python_never.clear();
    } else if (kind == "F") {
      python_decoded.emplace_back(unhex(a.substr(1)), unhex(b.substr(1)));
      python_never.push_back(flag == "1");
    } else if (kind == "E") {
      ASSERT_LT(l, lists.size());
      EXPECT_EQ(python_decoded, lists[l]) << "python decoding our block " << l;
      EXPECT_EQ(python_never, sensitive[l]) << l;
      const Decoded r = decode(d, unhex(a.substr(1)));
      ASSERT_EQ(r.result, DecodeResult::kOk) << "our decoding of python's block " << l;
      EXPECT_EQ(r.fields, lists[l]) << l;
      // Python sends a sensitive field that its table holds as an indexed field: only the
      // converse is wrong.
      for (size_t i = 0; i < r.never_indexed.size(); ++i) {
        EXPECT_TRUE(!r.never_indexed[i] || sensitive[l][i]) << l << " " << i;
      }
      ++l;
    }
  }
  EXPECT_EQ(l, lists.size());
  std::remove(input.c_str());
  std::remove(output.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace peregrine::http2::hpack
