"""cuda_kernel_trace.py — a kernel trace (bench/cuda_kernel_trace.c) summed
by kernel: for each (name, grid x), how many ran, their time from start
to end, and the time each added past the end of every kernel before it
("exposed": what the kernel cost the sequence, where programmatic
dependent launch lets kernels start early and wait). Only the later part
of the trace counts (--skip, a fraction: the warm-up and graph capture
come first).

  python3 bench/cuda_kernel_trace.py TRACE [--skip 0.5] [--top 20]
"""
import argparse
import collections
import re


def short_name(mangled):
    """The function's own name of an Itanium-mangled kernel name."""
    m = re.match(r"_ZN?(\d+)", mangled)
    return mangled[m.end():m.end() + int(m.group(1))] if m else mangled


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--skip", type=float, default=0.5, help="fraction of the kernels, first in time, left out")
    ap.add_argument("--top", type=int, default=20, help="rows printed")
    args = ap.parse_args()
    rows = []
    with open(args.trace) as f:
        for line in f:
            p = line.split(None, 3)
            if len(p) == 4:
                rows.append((int(p[0]), int(p[1]), int(p[2]), short_name(p[3].strip())))
    rows.sort()
    rows = rows[int(len(rows) * args.skip):]
    if not rows:
        raise SystemExit("no kernels in %s" % args.trace)
    first, front = rows[0][0], rows[0][0]
    agg = collections.defaultdict(lambda: [0, 0, 0, 0])  # count, ns start to end, ns exposed, ns idle before
    for start, end, grid, name in rows:
        a = agg[(name, grid)]
        a[0] += 1
        a[1] += end - start
        a[2] += max(0, end - max(start, front))
        a[3] += max(0, start - front)
        front = max(front, end)
    print("%d kernels over %.3f ms" % (len(rows), (front - first) / 1e6))
    print("%-36s %6s %7s %10s %10s %10s   us each: run / exposed / idle before" %
          ("kernel", "grid.x", "count", "run ms", "exposed ms", "idle ms"))
    for (name, grid), a in sorted(agg.items(), key=lambda kv: -(kv[1][2] + kv[1][3]))[:args.top]:
        n = a[0]
        print("%-36s %6d %7d %10.3f %10.3f %10.3f   %.2f / %.2f / %.2f" %
              (name[:36], grid, n, a[1] / 1e6, a[2] / 1e6, a[3] / 1e6, a[1] / n / 1e3, a[2] / n / 1e3, a[3] / n / 1e3))


if __name__ == "__main__":
    main()
