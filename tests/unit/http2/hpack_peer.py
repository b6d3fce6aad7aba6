# The other side of HpackPeer.CrossChecksWithPythonHpack (hpack_test.cc): Debian's python3-hpack
# decodes the blocks our encoder wrote, and encodes the same header lists for our decoder.
# Input lines: "L" starts a list, "F x<hex name> x<hex value> <0|1 sensitive>" adds a field,
# "B x<hex>" is our encoding of the list (the "x" keeps an empty string a word). Output per
# list: "D", then "F ..." for each field python decoded (1 when never-indexed), then "E x<hex>",
# python's own encoding of the list.
import sys

import hpack

decoder = hpack.Decoder()
encoder = hpack.Encoder()
fields = []
out = []
for line in open(sys.argv[1]):
    parts = line.split()
    if not parts:
        continue
    if parts[0] == "L":
        fields = []
    elif parts[0] == "F":
        name, value = bytes.fromhex(parts[1][1:]), bytes.fromhex(parts[2][1:])
        sensitive = parts[3] == "1"
        fields.append(hpack.NeverIndexedHeaderTuple(name, value) if sensitive
                      else hpack.HeaderTuple(name, value))
    elif parts[0] == "B":
        block = bytes.fromhex(parts[1][1:])
        out.append("D")
        for f in decoder.decode(block, raw=True):
            flag = "1" if isinstance(f, hpack.NeverIndexedHeaderTuple) else "0"
            out.append("F x%s x%s %s" % (bytes(f[0]).hex(), bytes(f[1]).hex(), flag))
        out.append("E x" + encoder.encode(fields, huffman=True).hex())
print("\n".join(out))
