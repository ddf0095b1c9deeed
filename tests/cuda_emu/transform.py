#!/usr/bin/env python3
# tests/cuda_emu/transform.py - turns a .cu/.cuh file of src/kernels/cuda into plain C++
# for the CPU emulation: `kernel<<<grid, block, smem, stream>>>(args)` becomes
# `emu::launch(grid, block, smem, stream, kernel)(args)` and the dynamic shared memory
# declaration becomes a pointer into the emulated block's buffer.
# usage: transform.py IN OUT
import re
import sys

src = open(sys.argv[1]).read()
src = src.replace('extern __shared__ float smem[];', 'float *smem = emu::dyn_smem();')
# a launch: a name (with template arguments) not inside a format string, then <<<...>>>(
launch = re.compile(r'(?<![%\w])([A-Za-z_][A-Za-z_0-9]*(?:<[^<>;]*>)?)\s*<<<([^"]*?)>>>\(', re.S)
out, n = launch.subn(lambda m: 'emu::launch(%s, %s)(' % (m.group(2), m.group(1)), src)
if re.search(r'>>>\s*\(', out):  # a launch left over (comments and format strings pass)
    sys.exit('transform.py: %s: a launch the emulation does not understand' % sys.argv[1])
with open(sys.argv[2], 'w') as f:
    f.write('// generated from %s by tests/cuda_emu/transform.py\n' % sys.argv[1])
    f.write(out)
