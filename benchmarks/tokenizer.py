#!/usr/bin/env python3
"""benchmarks/tokenizer.py [--build build] [--big] - zeroc's tokenizer against
Hugging Face `tokenizers` on the Python documentation sources
(/usr/share/doc/python3-dev/html/_sources, Debian's python3-doc: ~12 MB of
.rst.txt, every document followed by <|endoftext|>):

  * equality: the ids of the whole corpus, token for token, and
    decode(encode(text)) == text;
  * speed: encode and decode MB/s, one thread and all cores: zeroc's
    bench_tokenizer (pthreads over whole documents) against tokenizers'
    encode_batch / decode_batch with RAYON_NUM_THREADS=1 and unset.

Tokenizers: the committed fixtures (vocab 1000 tokenizer.json, vocab 4096
vocab.json + merges.txt) and, with --big, one of GPT-2's size (vocab 50257)
trained here on the same corpus (a few minutes on 2 cores; kept in
$TMPDIR/zeroc-tok-bench). Run with a Python that has `tokenizers`, e.g.
  /work/venv/bin/python benchmarks/tokenizer.py --big
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
SOURCES = "/usr/share/doc/python3-dev/html/_sources"
EOT = "<|endoftext|>"
WORK = os.path.join(tempfile.gettempdir(), "zeroc-tok-bench")


def documents():
    return [open(f, encoding="utf-8", newline="").read()
            for f in sorted(glob.glob(os.path.join(SOURCES, "**", "*.txt"), recursive=True))]


def hf_tokenizer(spec):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    if spec.endswith("vocab.json"):
        t = Tokenizer(models.BPE.from_file(spec, spec[:-len("vocab.json")] + "merges.txt"))
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        t.decoder = decoders.ByteLevel()
        t.add_special_tokens([EOT])
        return t
    return Tokenizer.from_file(spec)


HF_CHILD = r"""
import json, sys, time, numpy as np
sys.path.insert(0, sys.argv[1])
from tokenizer import hf_tokenizer, documents, EOT
t = hf_tokenizer(sys.argv[2])
docs = [d + EOT for d in documents()]
nbytes = sum(len(d.encode()) for d in docs)
best_e = best_d = 1e30
for r in range(int(sys.argv[4])):
    t0 = time.perf_counter(); enc = t.encode_batch(docs); best_e = min(best_e, time.perf_counter() - t0)
    ids = [e.ids for e in enc]
    t0 = time.perf_counter(); back = t.decode_batch(ids, skip_special_tokens=False)
    best_d = min(best_d, time.perf_counter() - t0)
best_f = 1e30  # encode_batch_fast: no offsets (tokenizers >= 0.21)
for r in range(int(sys.argv[4]) if hasattr(t, "encode_batch_fast") else 0):
    t0 = time.perf_counter(); t.encode_batch_fast(docs); best_f = min(best_f, time.perf_counter() - t0)
np.concatenate([np.asarray(i, dtype=np.int32) for i in ids]).tofile(sys.argv[3])
print(json.dumps({"bytes": nbytes, "tokens": sum(map(len, ids)), "encode_MBps": nbytes / best_e / 1e6,
                  "encode_fast_MBps": nbytes / best_f / 1e6,
                  "decode_MBps": nbytes / best_d / 1e6, "roundtrip": "".join(back) == "".join(docs)}))
"""


def hf_run(spec, threads, out, reps):
    env = dict(os.environ)
    env.pop("RAYON_NUM_THREADS", None)
    if threads == 1:
        env["RAYON_NUM_THREADS"] = "1"
    env["TOKENIZERS_PARALLELISM"] = "true"
    r = subprocess.run([sys.executable, "-c", HF_CHILD, os.path.dirname(os.path.abspath(__file__)),
                        spec, out, str(reps)], env=env, capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def zeroc_run(bench, spec, corpus, threads, out, reps):
    r = subprocess.run([bench, spec, corpus, str(threads), out, str(reps)], capture_output=True,
                       text=True)
    if r.returncode:
        sys.exit(f"bench_tokenizer failed: {r.stderr}{r.stdout}")
    return json.loads(r.stdout)


def check_saved(build, spec):
    """zeroc_tokenizer_save's tokenizer.json, read by tokenizers, encodes the
    fixtures' texts as the original does."""
    import ctypes
    from tokenizers import Tokenizer
    lib = ctypes.CDLL(os.path.join(build, "libzeroc.so"))
    t = ctypes.c_void_p()
    out = os.path.join(WORK, "saved.json")
    if lib.zeroc_tokenizer_load(spec.encode(), ctypes.byref(t)) or \
            lib.zeroc_tokenizer_save(t, out.encode()):
        sys.exit(f"zeroc could not load and save {spec}")
    lib.zeroc_tokenizer_destroy(t)
    a, b = hf_tokenizer(spec), Tokenizer.from_file(out)
    for name in ("real.txt", "tricky.txt"):
        s = open(os.path.join(FIX, name), encoding="utf-8", newline="").read()
        if a.encode(s).ids != b.encode(s).ids:
            return False
    return True


def train_big():
    path = os.path.join(WORK, "bpe50257.json")
    if not os.path.exists(path):
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        t = Tokenizer(models.BPE())
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        t.decoder = decoders.ByteLevel()
        tr = trainers.BpeTrainer(vocab_size=50257, special_tokens=[EOT], show_progress=False,
                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        files = sorted(glob.glob(os.path.join(SOURCES, "**", "*.txt"), recursive=True))
        files += sorted(glob.glob("/usr/share/common-licenses/*"))
        t.train(files, tr)
        t.save(path)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--big", action="store_true", help="also a vocab-50257 tokenizer")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    bench = os.path.join(a.build, "benchmarks", "bench_tokenizer")
    os.makedirs(WORK, exist_ok=True)
    corpus = os.path.join(WORK, "corpus.txt")
    with open(corpus, "w", encoding="utf-8", newline="") as f:
        f.write("".join(d + EOT for d in documents()))
    specs = [os.path.join(FIX, "bpe1000.json"), os.path.join(FIX, "bpe4096.vocab.json")]
    if a.big:
        specs.append(train_big())
    cores = os.cpu_count()
    rows = []
    for spec in specs:
        name = os.path.basename(spec)
        for threads in sorted({1, cores}):
            hf_ids, zc_ids = os.path.join(WORK, "hf.ids"), os.path.join(WORK, "zc.ids")
            h = hf_run(spec, threads, hf_ids, a.reps)
            z = zeroc_run(bench, spec, corpus, threads, zc_ids, a.reps)
            x, y = np.fromfile(hf_ids, dtype=np.int32), np.fromfile(zc_ids, dtype=np.int32)
            n = min(len(x), len(y))
            diff = np.nonzero(x[:n] != y[:n])[0]
            first = int(diff[0]) if len(diff) else (n if len(x) != len(y) else -1)
            rows.append((name, z["vocab"], threads, z["bytes"], z["tokens"], h["tokens"], first,
                         z["roundtrip"], h["roundtrip"], z["encode_MBps"], h["encode_MBps"],
                         z["decode_MBps"], h["decode_MBps"], h["encode_fast_MBps"]))
            print(json.dumps({"tokenizer": name, "threads": threads, "zeroc": z, "tokenizers": h,
                              "first_difference": first}), flush=True)
    saved = {os.path.basename(s): check_saved(a.build, s) for s in specs}
    print()
    print("| tokenizer | vocab | threads | MB | tokens | equal | round trip | encode MB/s zeroc / "
          "tokenizers (encode_batch_fast) | decode MB/s zeroc / tokenizers |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3] / 1e6:.2f} | "
              f"{r[4]}{'' if r[4] == r[5] else ' / %d' % r[5]} | "
              f"{'yes' if r[6] < 0 else 'NO, first at %d' % r[6]} | {r[7]} / {r[8]} | "
              f"{r[9]:.2f} / {r[10]:.2f} ({r[13]:.2f}): {r[9] / r[10]:.1f}x | "
              f"{r[11]:.1f} / {r[12]:.1f}: {r[11] / r[12]:.1f}x |")
    print()
    print("saved by zeroc, read by tokenizers, same ids:",
          ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in saved.items()))
    return 0 if all(r[6] < 0 and r[7] for r in rows) and all(saved.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
