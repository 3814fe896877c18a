#!/usr/bin/env python3
"""Makes a host-C++ copy of a CUDA kernel file for cuda_emulation.hpp: the bodies of its PTX
wrappers (cp.async, ldmatrix, mma.sync: attention_mma.cu, gemm_grouped_mma.cu,
attention_decode_mma.cu, linear_fp8_stream.cu, linear_fp8.cuh) become calls of the emulation, its
dynamic shared memory the emulated CTA's, and its launches (kernel<<<...>>>(...)) the emulated
ones. Everything else is the kernel file as it is.

    emulate_kernel.py KERNEL.cu OUT.cpp

Fails naming what it could not find, so a change in the kernel file that the emulation does not
know about stops the build instead of testing something else.
"""
import os
import re
import sys

# The PTX wrappers of each kernel file the emulation knows, and their emulated bodies.
WRAPPERS = {
    "attention_mma.cu": [
        ("__device__ __forceinline__ void cp_async16(", "emu::cp_async16(smem, gmem);"),
        ("__device__ __forceinline__ void cp_async_commit(", "emu::commit();"),
        ("__device__ __forceinline__ void cp_async_wait(", "emu::wait(N);"),
        ("__device__ __forceinline__ void ldsm_x4(", "emu::ldsm(r, addr, false);"),
        ("__device__ __forceinline__ void ldsm_x4_trans(", "emu::ldsm(r, addr, true);"),
        ("__device__ __forceinline__ void mma(", "emu::mma(c, a, b0, b1);"),
    ],
    "gemm_grouped_mma.cu": [
        ("__device__ __forceinline__ void cp_async16(", "emu::cp_async16(smem, gmem);"),
        ("__device__ __forceinline__ void cp_async_commit(", "emu::commit();"),
        ("__device__ __forceinline__ void cp_async_wait(", "emu::wait(N);"),
        ("__device__ __forceinline__ void ldsm_x4(", "emu::ldsm(r, addr, false);"),
        ("__device__ __forceinline__ void mma_fp8(", "emu::mma_fp8(c, a, b0, b1, kE4m3, kE4m3);"),
    ],
    "attention_decode_mma.cu": [
        ("__device__ __forceinline__ void cp_async16(", "emu::cp_async16(smem, gmem);"),
        ("__device__ __forceinline__ void cp_async_commit(", "emu::commit();"),
        ("__device__ __forceinline__ void cp_async_wait(", "emu::wait(N);"),
        ("__device__ __forceinline__ void ldsm_x4(", "emu::ldsm(r, addr, false);"),
        ("__device__ __forceinline__ void ldsm_x4_trans(", "emu::ldsm(r, addr, true);"),
        ("__device__ __forceinline__ void mma_bf16(", "emu::mma(c, a, b0, b1);"),
        ("__device__ __forceinline__ void mma_f16(", "emu::mma_f16(c, a, b0, b1);"),
    ],
    "linear_fp8_stream.cu": [
        ("__device__ __forceinline__ void mma_fp8(", "emu::mma_fp8(c, a, b0, b1, true, true);"),
    ],
    "linear_fp8.cuh": [
        ("__device__ __forceinline__ void mma_e4m3(",
         "const uint32_t a[4] = {a0, a1, a2, a3};\n  emu::mma_fp8(d, a, b0, b1, true, true);"),
    ],
    "quantize.cuh": [],
    "rmsnorm.cuh": [],
    "swiglu.cuh": [],
}
# How many dynamic and static shared memory declarations and launches each file has.
EXPECTED = {
    "attention_mma.cu": (3, 0, 1),
    "gemm_grouped_mma.cu": (1, 0, 1),
    "attention_decode_mma.cu": (1, 5, 1),
    "linear_fp8_stream.cu": (0, 1, 2),
    "linear_fp8.cuh": (1, 1, 1),
    "quantize.cuh": (2, 0, 3),
    "rmsnorm.cuh": (0, 4, 6),
    "swiglu.cuh": (0, 0, 0),
}


def replace_body(text, head, body):
    """The function whose definition starts with `head` gets `body` (up to its closing brace)."""
    start = text.find(head)
    if start < 0:
        sys.exit(f"emulate_kernel.py: no '{head}' in the kernel file")
    brace = text.index("{", start + len(head) - 1)
    end = text.index("\n}\n", brace)
    return text[:brace] + "{\n  " + body + "\n}" + text[end + 2:]


def main(args):
    if len(args) != 2:
        sys.exit("usage: emulate_kernel.py KERNEL.cu OUT.cpp")
    name = os.path.basename(args[0])
    if name not in WRAPPERS:
        sys.exit(f"emulate_kernel.py: {name} is not a kernel file the emulation knows")
    text = open(args[0]).read()
    for head, body in WRAPPERS[name]:
        text = replace_body(text, head, body)
    # extern __shared__ __align__(16) T name[];  →  T* name = the emulated CTA's shared memory.
    text, shared = re.subn(
        r"extern __shared__ __align__\(\d+\) ((?:unsigned )?\w+) (\w+)\[\];",
        r"\1* \2 = emu::shared_memory<\1>();", text)
    # __shared__ T name[N];  →  T* name = the emulated CTA's array `name` (one per CTA).
    text, static = re.subn(
        r"__shared__ (?:__align__\(\d+\) )?((?:unsigned )?\w+) (\w+)\[([^\]]+)\];",
        r'\1* \2 = emu::static_shared<\1>(\3, "\2");', text)
    # kernel<<<config>>>(args)  →  emu::launch_kernel(kernel, emu::Config{config}, args); the
    # kernel a name or a template's (kernel<A, B>).
    text, launches = re.subn(
        r"([\w:]+(?:<[^<>;()]*>)?)\s*<<<(.*?)>>>\((\s*\))?",
        lambda m: f"emu::launch_kernel({m.group(1)}, emu::Config{{{m.group(2)}}}"
        + (")" if m.group(3) else ", "), text, flags=re.S)
    if (shared, static, launches) != EXPECTED[name]:
        sys.exit(f"emulate_kernel.py: {name} has {shared} dynamic and {static} static shared "
                 f"memory declarations and {launches} launches, the emulation expects "
                 f"{EXPECTED[name]}")
    if "<<<" in text or "__shared__" in text:
        sys.exit("emulate_kernel.py: a launch or shared memory declaration left")
    if "asm" in text.replace("emu::", ""):
        rest = [line for line in text.splitlines() if "asm" in line]
        sys.exit(f"emulate_kernel.py: inline PTX left: {rest[0].strip()}")
    with open(args[1], "w") as out:
        out.write(f"// Generated by tests/emulation/emulate_kernel.py from {args[0]}: do not edit.\n")
        out.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
