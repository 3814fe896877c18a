#!/usr/bin/env python3
"""The ELF checks of the GPU bundle (tools/gpu/bundle.sh): reads the dynamic section of x86-64
ELF files itself, so it needs neither readelf nor ldd.

    bundle_elf.py check BUNDLE_DIR    every shared library that an ELF file under BUNDLE_DIR
                                      needs (DT_NEEDED) is in BUNDLE_DIR/lib or is one the GPU
                                      machine provides (glibc's, the NVIDIA driver's, the CUDA
                                      toolkit's: the list below); the CUDA module does not need
                                      NCCL; bin/ executables search ../lib first (RPATH
                                      $ORIGIN/../lib) and no search path has an empty entry
                                      (which means the current folder); a library in lib/
                                      with a RUNPATH finds the others there. Exit 1 on a
                                      problem.
    bundle_elf.py trim-rpath FILE...  removes trailing ':' from DT_RPATH / DT_RUNPATH in place
                                      (CMake leaves one on build-tree executables; an empty
                                      entry makes the loader search the current folder)
    bundle_elf.py runpath-to-rpath FILE...
                                      turns a DT_RUNPATH into a DT_RPATH in place (a copied
                                      library such as Open MPI's has one): the loader then also
                                      searches the executable's RPATH ($ORIGIN/../lib) for that
                                      library's own dependencies, which a RUNPATH rules out
"""

import os
import re
import struct
import sys

# Libraries the GPU machine provides: glibc's own, the NVIDIA driver's, the CUDA toolkit's
# (cuBLASLt, found at run time by the round; NCCL only ever dlopen'ed, never needed).
PROVIDED = [
    r"ld-linux-x86-64\.so\.2", r"linux-vdso\.so\.1",
    r"lib(c|m|dl|pthread|rt|resolv|util|anl|mvec|BrokenLocale|nsl|thread_db)\.so\.\d+",
    r"libcuda\.so\.1", r"libnvidia-.*\.so.*",
    r"libcublasLt\.so\.13", r"libcublas\.so\.13",
]
NEVER_NEEDED = {"libnccl.so.2": "NCCL is loaded at run time, only for more than one rank"}

DT_NEEDED, DT_STRTAB, DT_RPATH, DT_RUNPATH = 1, 5, 15, 29


class Elf:
    """The dynamic section of a 64-bit little-endian ELF file."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = f.read()
        d = self.data
        if d[:4] != b"\x7fELF" or d[4] != 2 or d[5] != 1:
            raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
        phoff, = struct.unpack_from("<Q", d, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", d, 0x36)
        self.loads, dynamic = [], None
        for i in range(phnum):
            p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(
                "<IIQQQQ", d, phoff + i * phentsize)
            if p_type == 1:
                self.loads.append((p_vaddr, p_offset, p_filesz))
            elif p_type == 2:
                dynamic = (p_offset, p_filesz)
        self.entries = []  # (tag, value, file offset of the entry)
        if dynamic:
            off, size = dynamic
            for pos in range(off, off + size, 16):
                tag, val = struct.unpack_from("<qQ", d, pos)
                if tag == 0:
                    break
                self.entries.append((tag, val, pos))
        strtab = next((v for t, v, _ in self.entries if t == DT_STRTAB), None)
        self.strtab = self.file_offset(strtab) if strtab is not None else None

    def file_offset(self, vaddr):
        for v, o, n in self.loads:
            if v <= vaddr < v + n:
                return vaddr - v + o
        raise ValueError(f"address {vaddr:#x} is in no loaded segment")

    def string_at(self, index):
        start = self.strtab + index
        return self.data[start:self.data.index(b"\0", start)].decode()

    def strings(self, tag):
        return [self.string_at(v) for t, v, _ in self.entries if t == tag]


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def check(bundle):
    problems, files = [], []
    for sub in ("bin", "lib"):
        folder = os.path.join(bundle, sub)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and is_elf(path):
                files.append((sub, name, path))
    inside = {name for sub, name, _ in files if sub == "lib"}
    provided = [re.compile(p + "$") for p in PROVIDED]
    for sub, name, path in files:
        elf = Elf(path)
        where = f"{sub}/{name}"
        for lib in elf.strings(DT_NEEDED):
            if lib in NEVER_NEEDED:
                problems.append(f"{where} needs {lib}: {NEVER_NEEDED[lib]}")
            elif lib not in inside and not any(p.match(lib) for p in provided):
                problems.append(f"{where} needs {lib}, which is neither in lib/ nor provided by "
                                "the GPU machine (glibc, the driver, the CUDA toolkit)")
        paths = elf.strings(DT_RPATH) + elf.strings(DT_RUNPATH)
        for p in paths:
            if "" in p.split(":"):
                problems.append(f"{where}: search path '{p}' has an empty entry (the current "
                                "folder); run bundle_elf.py trim-rpath")
        runpath = elf.strings(DT_RUNPATH)
        if sub == "lib" and runpath and "$ORIGIN" not in runpath[0].split(":"):
            stranded = [lib for lib in elf.strings(DT_NEEDED) if lib in inside]
            if stranded:
                problems.append(f"{where} has RUNPATH '{runpath[0]}', so it does not find "
                                f"{', '.join(stranded)} in lib/; run bundle_elf.py "
                                "runpath-to-rpath")
        rpath = elf.strings(DT_RPATH)
        if sub == "bin" and (not rpath or "$ORIGIN/../lib" not in rpath[0].split(":")):
            problems.append(f"{where} has no RPATH $ORIGIN/../lib: it would not find lib/")
    for p in problems:
        print(f"bundle check: {p}", file=sys.stderr)
    print(f"bundle check: {len(files)} ELF files, "
          + ("every needed library is in lib/ or provided by the GPU machine" if not problems
             else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


def trim_rpath(path):
    elf = Elf(path)
    data = bytearray(elf.data)
    changed = False
    for tag, val, _ in elf.entries:
        if tag not in (DT_RPATH, DT_RUNPATH):
            continue
        start = elf.strtab + val
        end = data.index(b"\0", start)
        # Only trailing ':' become NULs: no other string of .dynstr ends in ':', so none that
        # shares this one's tail changes.
        while end > start and data[end - 1] == ord(":"):
            end -= 1
            data[end] = 0
            changed = True
    if changed:
        with open(path, "r+b") as f:
            f.write(data)
    return 0


def runpath_to_rpath(path):
    elf = Elf(path)
    tags = [t for t, _, _ in elf.entries]
    if DT_RUNPATH not in tags:
        return 0
    if DT_RPATH in tags:
        print(f"bundle_elf.py: {path} has both an RPATH and a RUNPATH; left as it is",
              file=sys.stderr)
        return 1
    pos = next(p for t, _, p in elf.entries if t == DT_RUNPATH)
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(struct.pack("<q", DT_RPATH))
    return 0


def main(argv):
    if len(argv) == 2 and argv[0] == "check":
        return check(argv[1])
    if len(argv) >= 2 and argv[0] == "trim-rpath":
        for path in argv[1:]:
            trim_rpath(path)
        return 0
    if len(argv) >= 2 and argv[0] == "runpath-to-rpath":
        return max(runpath_to_rpath(path) for path in argv[1:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
