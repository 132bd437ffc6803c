#!/usr/bin/env python3
"""SGEMM: rlx's cpu_sgemm (through bench_sgemm, the C driver) vs NumPy on
Debian's OpenBLAS, side by side, 1 and 2 threads.

Shapes: square 256..2048, and the LLM shapes 1xKxN (decode) and 128xKxN
(prefill) for (K, N) in (576, 1536), (1536, 576), (2048, 8192), (4096, 4096).
Each side runs in rounds that alternate (rlx, NumPy, rlx, ...) so that a
noisy machine slows both alike; each round is several timed runs of >= 50 ms
after a warm-up, and starts after SETTLE_S of sleep: OpenBLAS's worker
threads spin for about 0.1 s after a call, and on a 2-core machine a
spinning worker of the side that just ran takes a core from the other
(rlx's 2-thread runs then ran at its 1-thread speed). Reported: median GFLOP/s over all runs and the ratio
rlx / NumPy (goal >= 0.95).

NumPy must be Debian's (python3-numpy, linked to libopenblas0-pthread), run
by /usr/bin/python3: the script installs the packages if they are missing
and re-runs itself under that interpreter. OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE are removed from NumPy's environment (they pin an older
kernel on some CPUs; --keep-coretype keeps them), and the kernel OpenBLAS
then runs is printed (threadpoolctl).

--cpu-time times both sides by process CPU time instead of the wall clock
(1 thread only): on a machine shared with other jobs it shows each kernel's
speed while it had the core.

--peer-lib LIB compares against that OpenBLAS called by the driver in its
own process (bench_sgemm --peer: runs alternate rlx, peer, ...) instead of
NumPy: for a machine without Debian's python3-numpy (the device machine:
carry Debian's libopenblas.so.0 and its libgfortran / libquadmath there).
The driver makes the call NumPy's a @ b makes: cblas_sgemm, cblas_sgemv for
M = 1.

  python3 bench/bench_sgemm.py [--driver build/bench_sgemm] [--rounds 3]
                               [--runs 3] [--threads 1,2] [--quick] [--cpu-time]
                               [--shapes MxKxN,...] [--peer-lib LIB]
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

SYSTEM_PYTHON = "/usr/bin/python3"
SETTLE_S = 0.2  # > the spin of OpenBLAS's idle workers (2^28 cycles)
DEBIAN_PACKAGES = ["python3-numpy", "libopenblas0-pthread", "python3-threadpoolctl"]


def system_numpy_ok():
    return subprocess.run([SYSTEM_PYTHON, "-c", "import numpy, threadpoolctl"],
                          capture_output=True).returncode == 0


def ensure_debian_numpy():
    if os.path.exists(SYSTEM_PYTHON) and system_numpy_ok():
        return
    if shutil.which("apt-get") is None:
        sys.exit("bench_sgemm: needs Debian's python3-numpy (apt-get not found)")
    print("installing " + " ".join(DEBIAN_PACKAGES), flush=True)
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq"] + DEBIAN_PACKAGES, check=True,
                   env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def reexec_under_system_python(args):
    """Runs this script again with /usr/bin/python3 and NumPy's environment."""
    env = dict(os.environ, RLX_BENCH_CHILD="1")
    if not args.keep_coretype:
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    os.execve(SYSTEM_PYTHON, [SYSTEM_PYTHON] + sys.argv, env)


def shapes(quick):
    square = [(n, n, n) for n in ((256, 1024) if quick else (256, 512, 1024, 2048))]
    kn = [(576, 1536), (1536, 576)] if quick else [(576, 1536), (1536, 576), (2048, 8192),
                                                   (4096, 4096)]
    llm = [(m, k, n) for m in (1, 128) for k, n in kn]
    return square + llm


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def run_driver(driver, threads, runs, shape, cpu_time, peer_lib=None):
    """rlx's kernel variant and GFLOP/s of its runs, and the peer's GFLOP/s
    (with peer_lib; else None)."""
    m, k, n = shape
    cmd = ([driver] + (["--cpu-time"] if cpu_time else []) +
           (["--peer", peer_lib] if peer_lib else []) + [str(threads), str(runs), str(m), str(k),
                                                         str(n)])
    lines = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
    rlx = lines[0].split()
    peer = [float(x) for x in lines[1].split()[4:]] if peer_lib else None
    return rlx[3], [float(x) for x in rlx[4:]], peer


def run_numpy(np, threadpool_limits, threads, runs, shape, cache, clock):
    m, k, n = shape
    if shape not in cache:
        rng = np.random.default_rng(12345)
        cache.clear()
        cache[shape] = (rng.uniform(-1, 1, (m, k)).astype(np.float32),
                        rng.uniform(-1, 1, (k, n)).astype(np.float32))
    a, b = cache[shape]
    flops = 2.0 * m * k * n
    out = []
    with threadpool_limits(limits=threads, user_api="blas"):
        t0 = clock()
        c = a @ b
        once = clock() - t0
        reps = 1 if once > 0.05 else int(0.05 / max(once, 1e-7)) + 1
        for _ in range(runs):
            t0 = clock()
            for _ in range(reps):
                c = a @ b
            out.append(flops * reps / (clock() - t0) / 1e9)
    del c
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--driver", default=os.path.join(root, "build", "bench_sgemm"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3, help="timed runs per round")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--quick", action="store_true", help="fewer shapes")
    ap.add_argument("--shapes", help="only these, e.g. 128x4096x4096,1024x1024x1024")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time by process CPU time (1 thread only)")
    ap.add_argument("--keep-coretype", action="store_true",
                    help="keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE for NumPy")
    ap.add_argument("--peer-lib", help="compare with cblas_sgemm of this OpenBLAS in the "
                    "driver's process instead of NumPy")
    args = ap.parse_args()
    if not os.access(args.driver, os.X_OK):
        sys.exit("bench_sgemm: no driver at %s (cmake --build build --target bench_sgemm)"
                 % args.driver)
    if args.cpu_time and args.threads != "1":
        sys.exit("bench_sgemm: --cpu-time needs --threads 1")
    if args.peer_lib:
        print("peer: %s (cblas_sgemm; cblas_sgemv for M = 1) in the driver's process" % args.peer_lib)
    else:
        if os.environ.get("RLX_BENCH_CHILD") != "1":
            ensure_debian_numpy()
            reexec_under_system_python(args)
        import numpy as np
        from threadpoolctl import threadpool_info, threadpool_limits

        print("numpy %s (%s)" % (np.__version__, np.__file__))
        for lib in threadpool_info():
            if lib.get("user_api") == "blas":
                print("blas: %s %s, kernel %s, %s" % (lib.get("internal_api"), lib.get("version"),
                                                     lib.get("architecture"), lib.get("filepath")))
    print("OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s" % (os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
                                                       os.environ.get("OPENBLAS_L2_SIZE", "(unset)")))
    print("rounds %d x runs %d per side, median GFLOP/s, clock: %s"
          % (args.rounds, args.runs, "process CPU time" if args.cpu_time else "wall"))
    clock = time.process_time if args.cpu_time else time.perf_counter
    print("%-18s %3s %10s %10s %7s" % ("M x K x N", "thr", "rlx", "peer" if args.peer_lib else "numpy",
                                        "ratio"))
    ratios = []
    cache = {}
    variant = "?"
    for threads in [int(t) for t in args.threads.split(",")]:
        todo = (shapes(args.quick) if not args.shapes else
                [tuple(int(d) for d in s.split("x")) for s in args.shapes.split(",")])
        for shape in todo:
            rlx, ref = [], []
            for _ in range(args.rounds):
                time.sleep(SETTLE_S)
                variant, g, peer = run_driver(args.driver, threads, args.runs, shape, args.cpu_time,
                                              args.peer_lib)
                rlx += g
                if not args.peer_lib:
                    time.sleep(SETTLE_S)
                ref += peer if args.peer_lib else run_numpy(np, threadpool_limits, threads,
                                                            args.runs, shape, cache, clock)
            r, p = median(rlx), median(ref)
            ratios.append(r / p)
            print("%-18s %3d %10.1f %10.1f %7.2f" % ("%dx%dx%d" % shape, threads, r, p, r / p),
                  flush=True)
    geo = 1.0
    for x in ratios:
        geo *= x
    geo **= 1.0 / len(ratios)
    print("rlx kernel variant: %s" % variant)
    print("ratio rlx/%s: geometric mean %.2f, min %.2f, max %.2f"
          % ("peer" if args.peer_lib else "numpy", geo, min(ratios), max(ratios)))


if __name__ == "__main__":
    main()
