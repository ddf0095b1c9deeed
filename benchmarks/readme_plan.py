"""benchmarks/readme_plan.py - re-runs every `$ zeroc plan ...` example in README.md with
the built binary and replaces its output block, so the README shows what the planner
says today. usage: python3 benchmarks/readme_plan.py build/zeroc"""
import re
import shlex
import subprocess
import sys

zeroc = sys.argv[1]
text = open("README.md").read()


def rerun(m):
    cmd = m.group(1)
    args = shlex.split(cmd)[1:]  # drop "zeroc"
    out = subprocess.run([zeroc] + args, capture_output=True, text=True, check=True).stdout
    return "```\n$ " + cmd + "\n" + out.rstrip("\n") + "\n```"


text = re.sub(r"```\n\$ (zeroc plan[^\n]*)\n.*?```", rerun, text, flags=re.S)
open("README.md", "w").write(text)
