#!/usr/bin/env python3
"""pngpix.py FILE X0 Y0 X1 Y1 [...]: print "W H", then for each region
(X0..X1, Y0..Y1, inclusive) the "RRGGBB" colours its pixels have (sorted,
comma-separated) in an 8-bit RGB PNG (what ksbctl screenshot writes), decoded here
with zlib only (PNG spec, ISO/IEC 15948: IHDR, IDAT, filters 0-4), so the
test reads the file ksbctl wrote without trusting ksbctl's own code."""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit("not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if zlib.crc32(typ + body) != struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0]:
            sys.exit("bad CRC")
        if typ == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif typ == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype = hdr[:4]
    if depth != 8 or ctype != 2:
        sys.exit("not 8-bit RGB")
    raw, stride, rows, prev, i = zlib.decompress(idat), w * 3, [], bytearray(w * 3), 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - 3] if x >= 3 else 0
            b = prev[x]
            c = prev[x - 3] if x >= 3 else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pr) & 255
        rows.append(line)
        prev = line
    return w, h, rows


w, h, rows = decode(sys.argv[1])
print(w, h)
args = [int(v) for v in sys.argv[2:]]
for k in range(0, len(args), 4):
    x0, y0, x1, y1 = args[k:k + 4]
    print(",".join(sorted({rows[y][3 * x:3 * x + 3].hex()
                           for y in range(y0, y1 + 1)
                           for x in range(x0, x1 + 1)})))
