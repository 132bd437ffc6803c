#!/usr/bin/env python3
"""A/B of rlx SGEMM builds: several bench_sgemm drivers (e.g. one built from
an older commit and one from the working tree) run on the same shapes in
interleaved rounds (the order of the drivers alternates between rounds, so a
machine that slows down mid-way slows all alike); prints the median GFLOP/s of
each driver and each one's ratio to the first.

  python3 bench/bench_sgemm_ab.py --drivers OLD/bench_sgemm,NEW/bench_sgemm
      [--threads 1] [--rounds 4] [--runs 3] [--cpu-time]
      [--shapes 256x256x256,...]

For kernel changes at 1 thread on a loaded machine use --cpu-time (each
driver's process CPU time).
"""
import argparse
import os
import statistics
import subprocess


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--drivers", required=True, help="comma-separated bench_sgemm paths")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3, help="timed runs per driver and round")
    ap.add_argument("--cpu-time", action="store_true")
    ap.add_argument("--shapes", default="256x256x256,512x512x512,1024x1024x1024,128x1536x576")
    args = ap.parse_args()
    drivers = args.drivers.split(",")
    shapes = [tuple(s.split("x")) for s in args.shapes.split(",")]
    gflops = {(d, s): [] for d in drivers for s in shapes}
    for r in range(args.rounds):
        for s in shapes:
            for d in drivers if r % 2 == 0 else drivers[::-1]:
                cmd = [d] + (["--cpu-time"] if args.cpu_time else []) + [args.threads, str(args.runs)]
                out = subprocess.run(cmd + list(s), capture_output=True, text=True,
                                     check=True).stdout.split()
                gflops[(d, s)] += [float(x) for x in out[4:]]
    print("load average %.2f %.2f %.2f; threads %s; %s; medians of %d runs"
          % (os.getloadavg() + (args.threads, "process CPU time" if args.cpu_time else "wall",
                                args.rounds * args.runs)))
    print("%-16s" % "M x K x N" + "".join("%12s" % ("driver %d" % i) for i in range(len(drivers)))
          + "".join("%10s" % ("%d / 0" % i) for i in range(1, len(drivers))))
    for s in shapes:
        med = [statistics.median(gflops[(d, s)]) for d in drivers]
        print("%-16s" % "x".join(s) + "".join("%12.1f" % m for m in med)
              + "".join("%10.3f" % (m / med[0]) for m in med[1:]))
    for i, d in enumerate(drivers):
        print("driver %d: %s" % (i, d))


if __name__ == "__main__":
    main()
