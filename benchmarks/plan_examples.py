"""benchmarks/plan_examples.py - re-runs every `$ zeroc plan ...` example in docs/plan.md
with the built binary and replaces its output block, so the page shows what the planner
says today. usage: python3 benchmarks/plan_examples.py build/zeroc (from the repository root)"""
import re
import shlex
import subprocess
import sys

zeroc = sys.argv[1]
path = "docs/plan.md"
text = open(path).read()


def rerun(m):
    cmd = m.group(1)
    args = shlex.split(cmd)[1:]  # drop "zeroc"
    out = subprocess.run([zeroc] + args, capture_output=True, text=True, check=True).stdout
    return "```\n$ " + cmd + "\n" + out.rstrip("\n") + "\n```"


text = re.sub(r"```\n\$ (zeroc plan[^\n]*)\n.*?```", rerun, text, flags=re.S)
open(path, "w").write(text)
