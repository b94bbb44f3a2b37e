#!/usr/bin/env python3
"""An independent reader of TensorBoard event files, written from the format
(TensorFlow's record_writer / tensorboard's event_file_loader, and event.proto /
summary.proto), sharing no code with plait's writer: Debian's python3 has neither
tensorboard nor protobuf.

A file is TFRecords: uint64 length, uint32 masked CRC32C of the length's 8 bytes,
the data, uint32 masked CRC32C of the data (masked = ((c >> 15) | (c << 17)) +
0xa282ead8, mod 2^32). Each data is an Event: wall_time (1, double), step (2, int64
varint), file_version (3, string), summary (5, Summary: repeated value (1, Value: tag
(1, string), simple_value (2, float))). Unknown fields are skipped by wire type.

    tfevents_read.py FILE            prints "version V" then "step<TAB>tag<TAB>value" lines
    tfevents_read.py --json FILE     one JSON object: {"version", "events": [...]}

Exit 1 with a message on a bad CRC, a truncated record or a malformed protobuf.
"""
import json
import struct
import sys


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(c):
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


class BadFile(Exception):
    pass


def varint(buf, i):
    v, shift = 0, 0
    while True:
        if i >= len(buf):
            raise BadFile("truncated varint")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i
        if shift > 63:
            raise BadFile("varint longer than 10 bytes")


def fields(buf):
    """Yields (field number, wire type, value) of a message; value is an int for
    varints, bytes for fixed and length-delimited fields."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        elif wt == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise BadFile("wire type %d" % wt)
        if i > len(buf):
            raise BadFile("field %d runs past its message" % num)
        yield num, wt, v


def records(data):
    i = 0
    while i < len(data):
        if i + 12 > len(data):
            raise BadFile("truncated record header at byte %d" % i)
        head = data[i:i + 8]
        (n,) = struct.unpack("<Q", head)
        (hc,) = struct.unpack("<I", data[i + 8:i + 12])
        if hc != masked(crc32c(head)):
            raise BadFile("length CRC mismatch at byte %d" % i)
        if i + 12 + n + 4 > len(data):
            raise BadFile("truncated record at byte %d" % i)
        body = data[i + 12:i + 12 + n]
        (dc,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        if dc != masked(crc32c(body)):
            raise BadFile("data CRC mismatch at byte %d" % i)
        yield body
        i += 16 + n


def event(body):
    ev = {"wall_time": None, "step": 0, "file_version": None, "values": []}
    for num, wt, v in fields(body):
        if num == 1 and wt == 1:
            ev["wall_time"] = struct.unpack("<d", v)[0]
        elif num == 2 and wt == 0:
            ev["step"] = v - (1 << 64) if v >= 1 << 63 else v
        elif num == 3 and wt == 2:
            ev["file_version"] = v.decode("utf-8")
        elif num == 5 and wt == 2:
            for snum, swt, sv in fields(v):
                if snum != 1 or swt != 2:
                    continue
                tag, value = None, None
                for vnum, vwt, vv in fields(sv):
                    if vnum == 1 and vwt == 2:
                        tag = vv.decode("utf-8")
                    elif vnum == 2 and vwt == 5:
                        value = struct.unpack("<f", vv)[0]
                ev["values"].append((tag, value))
    return ev


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    out = {"version": None, "events": []}
    for k, body in enumerate(records(data)):
        ev = event(body)
        if k == 0:
            out["version"] = ev["file_version"]
            out["first_wall_time"] = ev["wall_time"]
        for tag, value in ev["values"]:
            out["events"].append({"step": ev["step"], "tag": tag, "value": value,
                                  "wall_time": ev["wall_time"]})
    return out


def main(argv):
    as_json = argv[1:2] == ["--json"]
    path = argv[2] if as_json else argv[1]
    try:
        r = read(path)
    except BadFile as e:
        print("%s: %s" % (path, e), file=sys.stderr)
        return 1
    if as_json:
        json.dump(r, sys.stdout)
        print()
    else:
        print("version", r["version"])
        for e in r["events"]:
            print("%d\t%s\t%.9g" % (e["step"], e["tag"], e["value"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
