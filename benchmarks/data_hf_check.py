#!/usr/bin/env python3
"""benchmarks/data_hf_check.py - `zeroc data` against Hugging Face `tokenizers`:
the train shards of a run with --val-fraction 0 must hold, document after
document, the end-of-text id (when the tokenizer has one) and then exactly the
ids `tokenizers` gives for the document's text. Offline reference only (run
with a Python that has `tokenizers`, e.g. /work/venv/bin/python); CTest does
not depend on it.

usage: data_hf_check.py ZEROC_BINARY TOKENIZER_JSON [THREADS] -- FILE|GLOB...
Prints documents, tokens and the first difference, if any; exits 1 on one.
"""
import glob
import os
import struct
import subprocess
import sys
import tempfile

from tokenizers import Tokenizer


def shard_tokens(path):
    with open(path, "rb") as f:
        head = f.read(1024)
        magic, version, count = struct.unpack("<3i", head[:12])
        assert magic == 20240520 and version == 1, path
        data = f.read()
    assert len(data) == 2 * count, path
    return list(struct.unpack(f"<{count}H", data))


def inputs(args):
    out = []
    for a in args:
        if any(c in a for c in "*?["):
            out += sorted(glob.glob(a), key=lambda p: p.encode())
        else:
            out.append(a)
    return out


def main():
    sep = sys.argv.index("--")
    zeroc, tok_path = sys.argv[1], sys.argv[2]
    threads = sys.argv[3] if sep > 3 else "2"
    files = sys.argv[sep + 1:]
    with tempfile.TemporaryDirectory() as out:
        d = os.path.join(out, "shards")
        subprocess.run([zeroc, "data", "--tokenizer", tok_path, "--out", d, "--val-fraction", "0",
                        "--threads", threads, "--quiet"] + files, check=True, stdout=subprocess.DEVNULL)
        got = []
        for p in sorted(glob.glob(os.path.join(d, "train_*.bin"))):
            got += shard_tokens(p)
    tok = Tokenizer.from_file(tok_path)
    eot = tok.token_to_id("<|endoftext|>")
    want, nbytes = [], 0
    docs = inputs(files)
    for path in docs:
        raw = open(path, "rb").read()
        nbytes += len(raw)
        if not raw:
            continue
        if eot is not None:
            want.append(eot)
        want += tok.encode(raw.decode("utf-8"), add_special_tokens=False).ids
    if got == want:
        print(f"{tok_path}: {len(docs)} documents, {nbytes / 1e6:.2f} MB, {len(got)} tokens: "
              f"identical to tokenizers {__import__('tokenizers').__version__}")
        return 0
    i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    print(f"{tok_path}: DIFFERENT: {len(got)} tokens from zeroc, {len(want)} from tokenizers; "
          f"first difference at token {i}: zeroc {got[i:i + 8]} tokenizers {want[i:i + 8]}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
