#!/usr/bin/env python3
"""A shell script that links `keel` again from the objects rustc kept (`-C save-temps`), with
another function order and output (bench/link-order.sh): the link alone takes about a second,
where a build with a new order re-runs thin LTO for minutes.

Usage: relink.py LINK_ARGS ORDER OUT > relink.sh
LINK_ARGS is what `rustc --print link-args` printed for the keel binary.
"""
import shlex
import sys

link_args, order, out = sys.argv[1:4]
line = next(l for l in open(link_args) if '"-o"' in l or " -o " in l)
tokens = shlex.split(line)
env = []
while tokens and "=" in tokens[0] and not tokens[0].startswith("-"):
    env.append(tokens.pop(0))
o = tokens.index("-o")
tokens[o + 1] = out
tokens = [f"-Wl,--symbol-ordering-file={order}" if t.startswith("-Wl,--symbol-ordering-file=")
          else t for t in tokens]
if not any(t.startswith("-Wl,--symbol-ordering-file=") for t in tokens):
    tokens += [f"-Wl,--symbol-ordering-file={order}", "-Wl,--no-warn-symbol-ordering"]
print("#!/usr/bin/env bash\nexec env " + " ".join(shlex.quote(t) for t in env) + " "
      + " ".join(shlex.quote(t) for t in tokens))
