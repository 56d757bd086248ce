#!/usr/bin/env python3
"""Copy a GGUF file with metadata keys set, replaced or removed.

Usage: scripts/gguf-set.py IN.gguf OUT.gguf KEY=TYPE:VALUE ... [-KEY ...]

TYPE is int (written as int32 unless the key exists with another integer
type), float (float32), bool (true/false) or str, as llama.cpp's
--override-kv spells them; -KEY removes a key. The tensor table and data are
copied unchanged (the data section keeps its alignment); OUT is written to a
temporary file and renamed into place. For experiments such as declaring a
trained model's layers sliding-window ones:

  scripts/gguf-set.py tkv-test-23M.gguf tkv-swa.gguf \\
      llama.attention.sliding_window=int:256 llama.attention.sliding_window_pattern=int:3

Python 3 standard library only.
"""
import mmap
import os
import struct
import sys

# GGUF value types (gguf.md): id -> struct format (None: string / array).
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
           12: "d"}
STRING, ARRAY = 8, 9
INT_TYPES = {0, 1, 2, 3, 4, 5, 10, 11}


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return v[0]

    def string(self):
        n = self.take("Q")
        s = self.data[self.at:self.at + n]
        self.at += n
        return s

    def value(self, t):
        """The raw bytes of one value of type t."""
        start = self.at
        if t in SCALARS:
            self.take(SCALARS[t])
        elif t == STRING:
            self.string()
        elif t == ARRAY:
            et, n = self.take("I"), self.take("Q")
            for _ in range(n):
                self.value(et)
        else:
            sys.exit(f"gguf-set: unknown value type {t} at byte {start}")
        return self.data[start:self.at]


def encode(key, spec, old_type):
    if ":" not in spec:
        sys.exit(f"gguf-set: {key}: expected TYPE:VALUE (int, float, bool, str), got '{spec}'")
    kind, text = spec.split(":", 1)
    try:
        if kind == "int":
            t = old_type if old_type in INT_TYPES else 5
            return t, struct.pack("<" + SCALARS[t], int(text))
        if kind == "float":
            return 6, struct.pack("<f", float(text))
        if kind == "bool":
            if text not in ("true", "false"):
                raise ValueError("not true or false")
            return 7, struct.pack("<?", text == "true")
        if kind == "str":
            b = text.encode()
            return STRING, struct.pack("<Q", len(b)) + b
    except (ValueError, struct.error) as e:
        sys.exit(f"gguf-set: {key}: bad {kind} value '{text}': {e}")
    sys.exit(f"gguf-set: {key}: unknown type '{kind}' (int, float, bool, str)")


def main(argv):
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    src, dst, edits = argv[1], argv[2], argv[3:]
    try:
        with open(src, "rb") as f:
            if os.fstat(f.fileno()).st_size < 24:
                sys.exit(f"gguf-set: {src}: not a GGUF file")
            # Mapped, not read: a model may be larger than the memory at hand.
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        sys.exit(f"gguf-set: {src}: {e.strerror}")
    r = Reader(data)
    if data[:4] != b"GGUF":
        sys.exit(f"gguf-set: {src}: not a GGUF file")
    r.at = 4
    version, n_tensors, n_kv = r.take("I"), r.take("Q"), r.take("Q")
    if version != 3:
        sys.exit(f"gguf-set: {src}: GGUF version {version} (3 expected)")
    kv = []  # (key bytes, type, value bytes)
    for _ in range(n_kv):
        key = r.string()
        t = r.take("I")
        kv.append((key, t, r.value(t)))
    infos_start = r.at
    for _ in range(n_tensors):
        r.string()
        dims = r.take("I")
        r.at += 8 * dims + 4 + 8  # dims, type, offset
    infos = data[infos_start:r.at]
    alignment = 32
    for key, t, v in kv:
        if key == b"general.alignment" and t in INT_TYPES:
            alignment = struct.unpack("<" + SCALARS[t], v)[0]
    data_start = (r.at + alignment - 1) // alignment * alignment

    for e in edits:
        if e.startswith("-"):
            key = e[1:].encode()
            if not any(k == key for k, _, _ in kv):
                sys.exit(f"gguf-set: {src} has no key {e[1:]}")
            kv = [x for x in kv if x[0] != key]
            continue
        if "=" not in e:
            sys.exit(f"gguf-set: '{e}' is not KEY=TYPE:VALUE or -KEY")
        name, spec = e.split("=", 1)
        key = name.encode()
        old = next((t for k, t, _ in kv if k == key), None)
        t, v = encode(name, spec, old)
        kv = [x for x in kv if x[0] != key] + [(key, t, v)]

    head = b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(kv))
    for key, t, v in kv:
        head += struct.pack("<Q", len(key)) + key + struct.pack("<I", t) + v
    head += infos
    head += b"\0" * ((-len(head)) % alignment)
    tmp = dst + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head)
        for at in range(data_start, len(data), 64 << 20):
            f.write(data[at:at + (64 << 20)])
    os.replace(tmp, dst)
    print(f"gguf-set: wrote {dst} ({len(edits)} change(s))")


if __name__ == "__main__":
    main(sys.argv)
