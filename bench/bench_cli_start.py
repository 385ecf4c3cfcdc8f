"""How fast the CLI answers ``cat ARCHIVE ONE_FILE`` (issue 33, item 6: target <= 3x the
venv's ``python -c pass``) and ``info ARCHIVE``, end to end, as a user runs it.

The commands run interleaved, round after round (so a change of the machine's load hits all
of them alike): the venv's ``python -c pass``; ``znippy-sql cat`` of one file and ``znippy-sql
info``, answered by the compiled core (``cli/fast.py``); and the same two through the Python
path (the fast path turned off in that process), for comparison. Medians and spread (min-max)
in milliseconds, the ratio of the medians to ``python -c pass``; the same for the CPU time each
process took (user + system, from ``getrusage``: on a shared machine the wall clock is mostly
the load); appended to ``bench/results-native.md`` with the date, the machine and its load.

    PYTHONPATH=. .venv/bin/python bench/bench_cli_start.py [--rounds 30] [--files 10000]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results-native.md"
SLOW = ("import sys\nfrom znippy_sql.cli import fast, main\nfast.COMMANDS = ()\n"
        "sys.exit(main(sys.argv[1:]))")


def corpus(root: Path, files: int) -> None:
    """``files`` small source-like files in 100 directories (a source tree's shape)."""
    rnd = random.Random(1)
    words = [b"def", b"return", b"self", b"import", b"class", b"value", b"\n    ", b"(x)"]
    for i in range(files):
        d = root / f"pkg{i % 100:03d}"
        d.mkdir(exist_ok=True)
        n = rnd.randint(200, 6000)
        (d / f"mod{i:05d}.py").write_bytes(b" ".join(rnd.choice(words) for _ in range(n // 5)))


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU milliseconds of one run of ``cmd``."""
    cpu, start = _cpu(), time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    took, cpu = time.perf_counter() - start, _cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed: {done.stderr.decode()[:300]}")
    return took * 1000, cpu * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--base", help="a directory holding another znippy_sql package")
    ap.add_argument("--write", type=Path, default=RESULTS, help="the record to append to")
    args = ap.parse_args()
    python = sys.executable
    script = str(Path(python).with_name("znippy-sql"))
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        corpus(src, args.files)
        archive = Path(tmp) / "tree.znippy"
        from znippy_sql import open_archive, write_archive
        from znippy_sql.write.source import Entry

        write_archive(archive, src, posix=True)  # as `znippy-sql create` writes it
        with open_archive(archive) as a:
            paths = a.first_paths()
        member = paths[len(paths) // 2]
        small = Path(tmp) / "small.znippy"
        write_archive(small, [Entry(f"d/f{i:02d}.txt", data=b"line\n" * (i + 1))
                              for i in range(20)])
        out = Path(tmp) / "out"
        core = {
            "cat": [script, "cat", str(archive), member],
            "info": [script, "info", str(archive)],
            "verify": [script, "verify", str(archive)],
            "extract (20 files)": [script, "extract", str(small), "-o", str(out)],
        }
        commands = {"python -c pass": ([python, "-c", "pass"], env)}
        for name, cmd in core.items():
            commands[f"znippy-sql {name} (core)"] = (cmd, env)
            if args.base:
                commands[f"znippy-sql {name} (core, base)"] = (
                    cmd, dict(env, PYTHONPATH=os.path.abspath(args.base)))
        commands["znippy-sql cat (Python path)"] = (
            [python, "-c", SLOW, "cat", str(archive), member], env)
        commands["znippy-sql info (Python path)"] = (
            [python, "-c", SLOW, "info", str(archive)], env)
        for cmd, how in commands.values():  # warm the page cache and the .pyc files
            timed(cmd, how)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        load_before = os.getloadavg()
        for r in range(args.rounds):
            for name, (cmd, how) in commands.items():
                if "extract" in name:
                    cmd = [*cmd[:-1], f"{out}{r}-{len(times[name])}-{len(name)}"]
                times[name].append(timed(cmd, how))
        load_after = os.getloadavg()
    base = statistics.median(t for t, _ in times["python -c pass"])
    base_cpu = statistics.median(c for _, c in times["python -c pass"])
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"\n## `cat` of one file and `info` against `python -c pass` ({when})\n",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB, shared; "
        f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after. Python "
        f"{platform.python_version()}. Archive: {args.files:,} source files written with the "
        f"defaults of `create` (POSIX facts in `__meta__`), member `{member}`; "
        f"{args.rounds} interleaved rounds"
        + (f"; base: `{args.base}`" if args.base else "") + ".\n",
        "| command | wall median ms | wall min-max ms | x `python -c pass` | CPU median ms "
        "| CPU min-max ms | x `python -c pass` |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, runs in times.items():
        ts, cs = [t for t, _ in runs], [c for _, c in runs]
        med, cpu = statistics.median(ts), statistics.median(cs)
        lines.append(f"| {name} | {med:.1f} | {min(ts):.1f}-{max(ts):.1f} | {med / base:.2f} "
                     f"| {cpu:.1f} | {min(cs):.1f}-{max(cs):.1f} | {cpu / base_cpu:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.write.exists():
        args.write.write_text("# The native core: benchmark records\n\nCommands: "
                           "`bench/bench_cli_start.py` (issue 33, item 6).\n")
    with args.write.open("a") as fh:
        fh.write(text)


if __name__ == "__main__":
    main()
