"""The maven commands on an archive of a real repository, against answers from the disk.

Usage::

    .venv/bin/python bench/bench_modules.py [--repo ~/.m2/repository]
        [--ga org.apache.maven.plugins:maven-compiler-plugin]
        [--gav org.apache.maven.plugins:maven-dependency-plugin:3.8.1] [--runs 5]

The archive of ``--repo`` is written once (``--pkg-type auto``) under ``bench/out/``. Each
operation is timed three ways, the median of ``--runs``:

- *cold*: a fresh ``znippy-sql maven ARCHIVE ...`` process (interpreter start, imports, opening
  the archive, the answer);
- *first*: in one process with the archive open, the first call (builds the maven index;
  ``deps`` builds every model it needs);
- *warm*: the same call again (index and models kept per open archive).

Peers, measured in the same run: ``find REPO -path ...`` for ``versions`` and ``lookup`` (a
fresh process walking the tree, page cache warm); for ``deps``, the same resolver reading the
POMs from the directory (a fresh Python process, ``DirRepository`` below) and, where Java and
Maven's jars are installed, Maven 3.8's own resolver (``tests/data/maven/MavenDeps.java``, a
fresh JVM). Ratios are the peer's time over ours (above 1: we are faster), as in
BENCHMARKS.md.

``--all`` also resolves every POM of the repository as a root, in one process each side: ours
from the archive, Maven's in one JVM; it reports the time of each and how many trees agree
line for line (depth, coordinates, scope, optional) among those Maven built without an error.
"""

from __future__ import annotations

import argparse
import glob
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ZNIPPY = os.path.join(os.path.dirname(sys.executable), "znippy-sql")
MAVEN_REF = os.path.join(ROOT, "tests", "data", "maven", "MavenDeps.java")

#: the peer for deps: our resolver over the directory, as a script of its own
DISK_DEPS = r'''
import os, sys
from znippy_sql.modules.maven.resolve import Resolver

class DirRepository:
    def __init__(self, root): self.root = root
    def _dir(self, g, a, v): return os.path.join(self.root, *g.split("."), a, v)
    def pom(self, g, a, v):
        p = os.path.join(self._dir(g, a, v), f"{a}-{v}.pom")
        if not os.path.isfile(p): return None
        with open(p, "rb") as f: return os.path.relpath(p, self.root), f.read()
    def artifact(self, g, a, v, ext, cls):
        name = f"{a}-{v}{'-' + cls if cls else ''}.{ext}"
        p = os.path.join(self._dir(g, a, v), name)
        return os.path.relpath(p, self.root) if os.path.isfile(p) else None
    def versions(self, g, a):
        d = os.path.join(self.root, *g.split("."), a)
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

found = Resolver(DirRepository(sys.argv[1])).closure(tuple(sys.argv[2].split(":")))
print(len(found.resolved), len(found.missing))
'''


#: CPU milliseconds of each measured call (this process and the children it waited for)
CPU: list[float] = []


def _cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def median_ms(fn, runs: int) -> tuple[float, list[float]]:
    """Median wall milliseconds of ``runs`` calls; their CPU medians go to ``CPU``."""
    times, cpu = [], []
    for _ in range(runs):
        c, t = _cpu_s(), time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
        cpu.append((_cpu_s() - c) * 1000)
    CPU.append(statistics.median(cpu))
    return statistics.median(times), times


def run(argv: list[str], **kw) -> str:
    return subprocess.run(argv, capture_output=True, text=True, **kw).stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", default=os.path.expanduser("~/.m2/repository"))
    ap.add_argument("--ga", default="org.apache.maven.plugins:maven-compiler-plugin")
    ap.add_argument("--gav", default="org.apache.maven.plugins:maven-dependency-plugin:3.8.1")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--all", action="store_true",
                    help="every POM as a root, ours against Maven's resolver")
    args = ap.parse_args()

    from znippy_sql import modules, open_archive
    from znippy_sql.modules.maven import commands as mc

    os.makedirs(os.path.join(HERE, "out"), exist_ok=True)
    archive = os.path.join(HERE, "out", "modules-m2.znippy")
    t = time.perf_counter()
    subprocess.run([ZNIPPY, "create", args.repo, "-o", archive, "--pkg-type", "auto"],
                   check=True, capture_output=True)
    print(f"archive {archive}: {os.path.getsize(archive) / 1e6:.1f} MB written in "
          f"{time.perf_counter() - t:.1f} s")
    g, a = args.ga.split(":")
    gav = tuple(args.gav.split(":"))
    versions_out = run([ZNIPPY, "maven", archive, "versions", args.ga]).split()
    lookup_v = versions_out[-1]
    module = modules.by_name("maven")
    rows: list[tuple[str, str, float, list[float], float]] = []

    def add(op: str, how: str, ms: float, all_: list[float]) -> None:
        rows.append((op, how, ms, all_, CPU[-1]))

    def cold(name: str, argv: list[str]) -> None:
        ms, all_ = median_ms(lambda: run(argv), args.runs)
        add(name, "cold process", ms, all_)

    def first_warm(name: str, fn_factory) -> None:
        firsts, warms, fc, wc = [], [], [], []
        for _ in range(args.runs):
            with open_archive(archive) as arch:
                fn = fn_factory(arch)
                firsts.append(median_ms(fn, 1)[0])
                fc.append(CPU[-1])
                warms.append(median_ms(fn, 3)[0])
                wc.append(CPU[-1])
        rows.append((name, "first call, archive open", statistics.median(firsts), firsts,
                     statistics.median(fc)))
        rows.append((name, "warm call", statistics.median(warms), warms, statistics.median(wc)))

    # versions
    cold(f"versions {args.ga}", [ZNIPPY, "maven", archive, "versions", args.ga])
    first_warm(f"versions {args.ga}", lambda arch: lambda: mc.versions(arch, module, g, a))
    pattern = f"*/{g.replace('.', '/')}/{a}/*/*.pom"
    ms, all_ = median_ms(lambda: run(["find", args.repo, "-path", pattern]), args.runs)
    add(f"versions {args.ga}", f"peer: find -path '{pattern}'", ms, all_)
    # lookup
    coords = (g, a, lookup_v)
    cold(f"lookup {':'.join(coords)}", [ZNIPPY, "maven", archive, "lookup", ":".join(coords)])
    first_warm(f"lookup {':'.join(coords)}",
               lambda arch: lambda: mc.lookup(arch, module, coords))
    pattern = f"*/{g.replace('.', '/')}/{a}/{lookup_v}/*"
    ms, all_ = median_ms(lambda: run(["find", args.repo, "-path", pattern, "-type", "f",
                                      "-printf", "%s %p\n"]), args.runs)
    add(f"lookup {':'.join(coords)}", f"peer: find -path '{pattern}'", ms, all_)
    # deps
    found = mc.closure(open_archive(archive), module, gav)
    name = f"deps {args.gav}"
    cold(name, [ZNIPPY, "maven", archive, "deps", args.gav])

    def fresh_closure(arch):
        def fn():
            mc._CACHE.pop(arch, None)  # "first": nothing built yet for this archive
            mc.closure(arch, module, gav)
        return fn
    firsts, warms, fc, wc = [], [], [], []
    for _ in range(args.runs):
        with open_archive(archive) as arch:
            firsts.append(median_ms(fresh_closure(arch), 1)[0])
            fc.append(CPU[-1])
            warms.append(median_ms(lambda: mc.closure(arch, module, gav), 3)[0])
            wc.append(CPU[-1])
    rows.append((name, "first call, archive open", statistics.median(firsts), firsts,
                 statistics.median(fc)))
    rows.append((name, "warm call", statistics.median(warms), warms, statistics.median(wc)))
    ms, all_ = median_ms(lambda: run([sys.executable, "-c", DISK_DEPS, args.repo, args.gav]),
                         args.runs)
    add(name, "peer: Python script, POMs from disk (same resolver)", ms, all_)
    have_maven = shutil.which("java") and glob.glob("/usr/share/maven/lib/maven-resolver*.jar")
    if have_maven:
        ms, all_ = median_ms(lambda: run(["java", "-cp", "/usr/share/maven/lib/*", MAVEN_REF,
                                          args.repo, args.gav]), args.runs)
        add(name, "peer: Maven 3.8 resolver (fresh JVM, MavenDeps.java)", ms, all_)

    print(f"\ndeps {args.gav}: {len(found.resolved)} artifacts, depth "
          f"{max(r.depth for r in found.resolved)}, {len(found.poms)} POMs read, "
          f"{len(found.missing)} missing")
    print(f"versions {args.ga}: {len(versions_out)} versions; lookup of version {lookup_v}\n")
    print("| operation | how | wall ms (median) | runs (ms) | CPU ms | peer / ours: wall, CPU |")
    print("|---|---|---|---|---|---|")
    peers = {op: (ms, cpu) for op, how, ms, _, cpu in rows if how.startswith("peer: find")
             or how.startswith("peer: Python")}
    for op, how, ms, all_, cpu in rows:
        ratio = "" if how.startswith("peer") or op not in peers else \
            f"{peers[op][0] / ms:.2f}x, {peers[op][1] / max(cpu, 0.001):.2f}x"
        print(f"| {op} | {how} | {ms:.1f} | {', '.join(f'{x:.1f}' for x in all_)} | "
              f"{cpu:.1f} | {ratio} |")
    if args.all and have_maven:
        every_root(archive, args.repo, module)
    print(f"\nload average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


def every_root(archive: str, repo: str, module) -> None:
    from znippy_sql import open_archive
    from znippy_sql.modules.maven import commands as mc
    from znippy_sql.modules.maven.model import Environment

    roots = []
    for dirpath, _, names in os.walk(repo):
        for n in names:
            if n.endswith(".pom"):
                parts = os.path.relpath(dirpath, repo).split(os.sep)
                roots.append(f"{'.'.join(parts[:-2])}:{parts[-2]}:{parts[-1]}")
    roots.sort()
    t = time.perf_counter()
    out = run(["java", "-cp", "/usr/share/maven/lib/*", MAVEN_REF, repo, "-"],
              input="\n".join(roots) + "\n")
    maven_s = time.perf_counter() - t
    jdk, said, cur = "17", {}, None
    for line in out.splitlines():
        if line.startswith("@ java.version="):
            jdk = line.split("=", 1)[1]
        elif line.startswith("# "):
            cur = said[line[2:]] = {"lines": [], "error": False}
        elif line.startswith("!"):
            cur["error"] = True
        elif line.strip():
            cur["lines"].append(line)
    t = time.perf_counter()
    ours = {}
    with open_archive(archive) as arch:
        for root in roots:
            found = mc.closure(arch, module, tuple(root.split(":")), env=Environment(jdk=jdk))
            ours[root] = [f"{r.depth} {r.group_id}:{r.artifact_id}:{r.extension}:"
                          f"{r.classifier}:{r.version} {r.scope} {str(r.optional).lower()}"
                          for r in found.resolved]
    ours_s = time.perf_counter() - t
    clean = [r for r in roots if r in said and not said[r]["error"]]
    same = sum(ours[r] == said[r]["lines"] for r in clean)
    print(f"\nevery POM as a root ({len(roots)}): Maven {maven_s:.1f} s (one JVM), ours "
          f"{ours_s:.1f} s (one process, archive open); Maven without error: {len(clean)}, "
          f"trees the same: {same}")


if __name__ == "__main__":
    main()
