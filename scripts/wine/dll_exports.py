"""Prints a module-definition file (.def) listing the functions and data a
Windows DLL exports, read from its PE export table: what llvm-dlltool (zig
dlltool) needs to make the import library a MinGW-style link uses, since
lld cannot link against a DLL itself. scripts/windows makes python3XY.dll's
this way. It knows the PE format's export directory; nothing of Python."""

import struct
import sys


def exports(path):
    with open(path, "rb") as f:
        data = f.read()
    pe = struct.unpack_from("<I", data, 0x3C)[0]
    if data[pe : pe + 4] != b"PE\0\0":
        raise SystemExit(f"{path}: not a PE file")
    sections = struct.unpack_from("<H", data, pe + 6)[0]
    optional_size = struct.unpack_from("<H", data, pe + 20)[0]
    optional = pe + 24
    if struct.unpack_from("<H", data, optional)[0] != 0x20B:
        raise SystemExit(f"{path}: not a 64-bit (PE32+) image")
    export_rva = struct.unpack_from("<I", data, optional + 112)[0]
    table = optional + optional_size

    def offset(rva):
        for i in range(sections):
            s = table + 40 * i
            size, va, raw_size, raw = struct.unpack_from("<IIII", data, s + 8)
            if va <= rva < va + max(size, raw_size):
                return rva - va + raw
        raise SystemExit(f"{path}: RVA {rva:#x} in no section")

    d = offset(export_rva)
    count = struct.unpack_from("<I", data, d + 24)[0]
    names_rva = struct.unpack_from("<I", data, d + 32)[0]
    names = offset(names_rva)
    for i in range(count):
        name = offset(struct.unpack_from("<I", data, names + 4 * i)[0])
        yield data[name : data.index(b"\0", name)].decode("ascii")


def main():
    path = sys.argv[1]
    print(f"LIBRARY {path.replace(chr(92), '/').rsplit('/', 1)[-1]}")
    print("EXPORTS")
    for name in exports(path):
        print(f"    {name}")


if __name__ == "__main__":
    main()
