"""The long fuzz campaign: mutated archives through every read path, crashes isolated.

Usage::

    .venv/bin/python bench/fuzz.py [--seconds 600] [--cases N] [--workers 2] [--seed 0]
                                   [--out bench/out/fuzz] [--paths api,cli,duckdb,polars,append]

Cases are ``tests/_fuzz.py`` mutations (``flip``, ``flip-nodigest``, ``flip-forged``,
``truncate``, ``rows``, ``schema``, ``splice``) of three real archives, numbered from
``--seed``; each runs in a worker process through every read path of ``tests/_readpaths.py``.
A worker that dies (a signal: SIGSEGV, SIGBUS, an abort) is replaced and its case counted as
``crash``; a case that runs past ``--case-timeout`` is killed and counted as ``hang``. Every
case that is not clean (``bad``, ``wrong``, ``crash``, ``hang``) is written under ``--out``
with its description, so it can be replayed (``--replay FILE``). The summary (cases, outcomes
by class and mutation, time) is printed as Markdown for ``bench/results-hardening.md``.

``--family git|journal|catalog`` fuzzes what is not an archive tail (``tests/_fuzz_more.py``):
git archives (their sections and stored packs, checksums forged), the push journal (flips,
cuts, lying rows, a cut blob file), a catalog warehouse's Iceberg metadata JSON and Avro
manifests; cases run in this process, the summary is printed the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import select
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

ORDER = ("crash", "hang", "wrong", "bad", "refused", "ok", "harness")


def worker(work: Path, paths: tuple[str, ...], packed: bool = False) -> None:
    """Read case numbers on stdin, answer one JSON line per case on stdout."""
    from _fuzz import base_archives, case_bytes
    from _readpaths import every_read_path

    if packed:  # --packed: packed blobs and compressed index streams (issue 26)
        from _fuzz import packed_base_archives as base_archives  # type: ignore[assignment]
        from _fuzz import packed_case_bytes as case_bytes  # type: ignore[assignment]
    bases = base_archives(work / "bases")
    out = sys.stdout
    sys.stdout = sys.stderr  # whatever a read path prints must not reach the protocol
    print("ready", file=out, flush=True)
    for line in sys.stdin:
        seed = int(line)
        try:
            base, kind, data, text = case_bytes(bases, seed)
        except Exception as exc:  # a mutation this harness cannot build: say so, go on
            print(json.dumps({"seed": seed, "base": "?", "kind": "?", "worst": "harness",
                              "what": f"{type(exc).__name__}: {exc}"[:300], "paths": {},
                              "detail": [], "seconds": 0.0}), file=out, flush=True)
            continue
        case_dir = work / f"case-{os.getpid()}"
        if case_dir.exists():
            _rmtree(case_dir)
        case_dir.mkdir(parents=True)
        path = case_dir / "fuzz.znippy"
        path.write_bytes(data)
        started = time.perf_counter()
        outcomes = every_read_path(path, base.originals, case_dir / "w", paths=paths)
        kinds = Counter(o.kind for o in outcomes)
        worst = next(k for k in ORDER if kinds.get(k))  # an empty run cannot happen
        detail = [f"{o.where}: {o.kind}: {o.detail}" for o in outcomes if o.kind in
                  ("bad", "wrong")][:5]
        print(json.dumps({"seed": seed, "base": base.name, "kind": kind, "what": text,
                          "worst": worst, "paths": dict(kinds), "detail": detail,
                          "seconds": time.perf_counter() - started}), file=out, flush=True)


def _rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


class _Worker:
    def __init__(self, args: argparse.Namespace, n: int) -> None:
        cmd = [sys.executable, __file__, "--worker", "--out", str(args.out / f"w{n}"),
               "--paths", args.paths, *(["--packed"] if args.packed else [])]
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", POLARS_MAX_THREADS="1")
        args.out.mkdir(parents=True, exist_ok=True)
        self.log = open(args.out / f"worker-{n}.log", "a")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, env=env)
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        if ready.strip() != "ready":
            raise SystemExit(f"worker {n} did not start")
        self.seed: int | None = None
        self.since = 0.0

    def give(self, seed: int) -> None:
        assert self.proc.stdin is not None
        self.seed, self.since = seed, time.monotonic()
        self.proc.stdin.write(f"{seed}\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.log.close()


def campaign(args: argparse.Namespace) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    workers = [_Worker(args, n) for n in range(args.workers)]
    next_seed, done = args.seed, 0
    results: list[dict[str, object]] = []
    stop = started + args.seconds

    def more() -> bool:
        return time.monotonic() < stop and (args.cases is None
                                            or next_seed < args.seed + args.cases)

    for w in workers:
        if more():
            w.give(next_seed)
            next_seed += 1
    while any(w.seed is not None for w in workers):
        busy = {w.proc.stdout: w for w in workers if w.seed is not None}
        ready, _, _ = select.select(list(busy), [], [], 1.0)
        for stream in ready:
            w = busy[stream]
            line = stream.readline()  # type: ignore[union-attr]
            if line:
                results.append(json.loads(line))
            else:  # the worker died in the middle of its case
                code = w.proc.wait()
                results.append({"seed": w.seed, "worst": "crash", "kind": "?",
                                "what": f"worker died (exit {code})", "paths": {},
                                "detail": [], "seconds": time.monotonic() - w.since})
                workers[workers.index(w)] = w = _Worker(args, workers.index(w))
            w.seed = None
            done += 1
            if more():
                w.give(next_seed)
                next_seed += 1
        for i, w in enumerate(workers):
            if w.seed is not None and time.monotonic() - w.since > args.case_timeout:
                results.append({"seed": w.seed, "worst": "hang", "kind": "?",
                                "what": f"over {args.case_timeout} s", "paths": {},
                                "detail": [], "seconds": args.case_timeout})
                w.kill()
                workers[i] = _Worker(args, i)
                if more():
                    workers[i].give(next_seed)
                    next_seed += 1
    for w in workers:
        w.kill()
    _report(args, results, time.monotonic() - started)


def _report(args: argparse.Namespace, results: list[dict[str, object]], seconds: float) -> None:
    worst = Counter(str(r["worst"]) for r in results)
    paths: Counter[str] = Counter()
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    for r in results:
        paths.update(r["paths"])  # type: ignore[arg-type]
        by_kind[str(r["kind"])][str(r["worst"])] += 1
    bad = [r for r in results if r["worst"] in ("crash", "hang", "wrong", "bad", "harness")]
    (args.out / "not-clean.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bad))
    lines = [
        f"Command: `.venv/bin/python bench/fuzz.py --seconds {args.seconds:g} --workers "
        f"{args.workers} --seed {args.seed}" + (f" --cases {args.cases}" if args.cases else "")
        + "`  ",
        f"Date: {time.strftime('%Y-%m-%d')}; machine: {os.cpu_count()} cores, "
        f"{platform.machine()}, Python {platform.python_version()}; "
        f"load average at the end {', '.join(f'{x:.1f}' for x in os.getloadavg())}.",
        "",
        f"**{len(results):,} cases in {seconds:.0f} s** "
        f"({len(results) / max(seconds, 1e-9):.1f} cases/s, {args.workers} workers); "
        f"read-path runs: {sum(paths.values()):,}.",
        "",
        "| case outcome (worst of its read paths) | cases |",
        "|---|---|",
        *(f"| {k} | {worst.get(k, 0):,} |" for k in ORDER),
        "",
        "| mutation | cases | " + " | ".join(ORDER) + " |",
        "|---|---|" + "---|" * len(ORDER),
        *(f"| {k} | {sum(c.values()):,} | " + " | ".join(f"{c.get(o, 0):,}" for o in ORDER)
          + " |" for k, c in sorted(by_kind.items())),
        "",
        "| read-path outcome | runs |",
        "|---|---|",
        *(f"| {k} | {paths.get(k, 0):,} |" for k in ("ok", "refused", "bad", "wrong")),
    ]
    if bad:
        lines += ["", "Not clean (first 10):", ""]
        lines += [f"- seed {r['seed']} ({r['kind']}, {r.get('base', '?')}): {r['worst']}: "
                  f"{r['what']} — {'; '.join(r['detail'])[:300]}" for r in bad[:10]]
    print("\n".join(lines))


def replay(args: argparse.Namespace) -> None:
    """Run the cases of a not-clean.jsonl (or one seed) in this process, printing outcomes."""
    from _fuzz import base_archives, case_bytes
    from _readpaths import bad, every_read_path

    bases = base_archives(args.out / "bases")
    seeds = [int(json.loads(ln)["seed"]) for ln in Path(args.replay).read_text().splitlines()] \
        if not args.replay.isdigit() else [int(args.replay)]
    for seed in seeds:
        base, kind, data, text = case_bytes(bases, seed)
        path = args.out / "replay" / "fuzz.znippy"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        print(seed, kind, text)
        for o in bad(every_read_path(path, base.originals, args.out / "replay" / f"w{seed}",
                                     paths=tuple(args.paths.split(",")))):
            print("   ", o)


def family_campaign(args: argparse.Namespace) -> None:
    """Cases of one ``tests/_fuzz_more.py`` family, numbered from ``--seed``, run in this
    process for ``--seconds`` (or ``--cases``); the not-clean ones are written under
    ``--out``; a Markdown summary is printed."""
    import tempfile

    from _fuzz_more import run_case, make_bases

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        bases = make_bases(Path(tmp) / "bases")
        counts: Counter[str] = Counter()
        started = time.monotonic()
        seed = args.seed
        while (args.cases is None or seed - args.seed < args.cases) and (
                args.cases is not None or time.monotonic() - started < args.seconds):
            text, out = run_case(bases, args.family, seed, Path(tmp) / f"c{seed}")
            counts[out.kind] += 1
            if out.kind not in ("ok", "refused"):
                with open(args.out / f"not-clean-{args.family}.jsonl", "a") as fh:
                    fh.write(json.dumps({"seed": seed, "case": text, "outcome": out.kind,
                                         "what": out.what}) + "\n")
            seed += 1
        took = time.monotonic() - started
    print(f"family {args.family}: {sum(counts.values()):,} cases (seeds {args.seed}.."
          f"{seed - 1}) in {took:.0f} s, load {os.getloadavg()[0]:.1f}")
    print("| outcome | cases |\n|---|---|")
    for kind in ("bad", "wrong", "refused", "ok"):
        print(f"| {kind} | {counts[kind]:,} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--cases", type=int, default=None)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--case-timeout", type=float, default=120)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "fuzz")
    p.add_argument("--paths", default="api,cli,duckdb,polars,append")
    p.add_argument("--replay", default=None, help="a not-clean.jsonl, or one seed")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--family", choices=("archive", "git", "journal", "catalog"),
                   default="archive", help="what is mutated: archive tails (default), git "
                   "archives and packs, the push journal, a catalog's Iceberg metadata")
    p.add_argument("--packed", action="store_true",
                   help="archive family: the packed/compressed-index mutations of "
                   "tests/_fuzz.py instead")
    args = p.parse_args()
    if args.family != "archive":
        family_campaign(args)
    elif args.worker:
        worker(args.out, tuple(args.paths.split(",")), args.packed)
    elif args.replay:
        replay(args)
    else:
        campaign(args)


if __name__ == "__main__":
    main()
