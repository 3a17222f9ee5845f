#!/usr/bin/python3
"""An independent safetensors reader (the published format, json + struct):
checks the layout of FILE and writes tensor NAME's raw bytes to OUT.

  safetensors_read.py FILE NAME OUT
"""
import json
import struct
import sys

SIZES = {"F32": 4, "BF16": 2, "F16": 2, "F64": 8, "I64": 8, "I32": 4, "U8": 1}


def main():
    path, name, out = sys.argv[1:4]
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    end = 0
    entries = sorted((v["data_offsets"], k) for k, v in header.items() if k != "__metadata__")
    for (b, e), k in entries:
        v = header[k]
        count = 1
        for d in v["shape"]:
            count *= d
        assert b == end, f"{k}: data is not contiguous ({b} after {end})"
        assert e - b == count * SIZES[v["dtype"]], f"{k}: size does not match shape"
        end = e
    assert end == len(body), "trailing bytes after the last tensor"
    assert header["__metadata__"]["format"] == "zshard"
    b, e = header[name]["data_offsets"]
    open(out, "wb").write(body[b:e])


if __name__ == "__main__":
    main()
