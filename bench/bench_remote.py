"""Remote benchmark: requests, bytes and wall time of reading archives from S3 (SeaweedFS on
loopback, behind the counting proxy of tests/remote_server.py).

Usage::

    .venv/bin/python bench/bench_remote.py [--scale 0.25] [--work bench/out/remote]
                                           [--rounds 3]

For the ``src_tree`` and ``mixed_repo`` corpora (bench/corpora.py; one repo per top-level
directory), written once and uploaded: requests and body bytes counted at the proxy for open,
``cat`` of one small file, ``ls --repo``, extract of one repo and a Polars scan pruned to one
repo; wall time of ``cat`` of one file in a cold process (``znippy-sql cat s3://...``) against
``obstore.get`` of the whole archive in a cold process, and (over our HTTP server, which
ratarmount reads through fsspec + aiohttp) against ratarmount mounting a ``.tar.zst`` of the
same tree, needing libfuse; extract of the whole archive from S3
against download-then-local-extract, rounds alternating. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from corpora import generate  # noqa: E402
from remote_server import ACCESS_KEY, SECRET_KEY, RangeServer, Seaweed  # noqa: E402

BUCKET = "bench"


def options(endpoint: str) -> dict[str, str]:
    return {"endpoint": endpoint, "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY, "region": "us-east-1"}


def entries(root: str) -> list:  # type: ignore[type-arg]
    from znippy_sql import Entry

    out = []
    for dirpath, _, names in os.walk(root):
        for n in names:
            full = os.path.join(dirpath, n)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            out.append(Entry(rel, file=full, repo=rel.split("/", 1)[0] if "/" in rel else ""))
    return sorted(out, key=lambda e: e.relative_path)


def counted(proxy: RangeServer, fn) -> dict[str, float]:  # type: ignore[no-untyped-def]
    proxy.reset()
    t = time.perf_counter()
    fn()
    return {"requests": len(proxy.hits), "bytes": proxy.bytes_sent(),
            "seconds": round(time.perf_counter() - t, 4)}


def plan(url: str, opts: dict[str, str], proxy: RangeServer, work: Path) -> dict[str, object]:
    import polars as pl

    from znippy_sql import open_archive
    from znippy_sql.polars import scan

    out: dict[str, object] = {}
    holder: dict[str, object] = {}
    out["open"] = counted(proxy, lambda: holder.update(a=open_archive(url, storage_options=opts,
                                                                        cache=False)))
    arc = holder["a"]
    files = arc.select()  # type: ignore[attr-defined]
    sizes = arc.index()  # type: ignore[attr-defined]
    small = min((p for p, s, q in zip(sizes.column("relative_path").to_pylist(),
                                      sizes.column("uncompressed_size").to_pylist(),
                                      sizes.column("chunk_seq").to_pylist())
                 if 2000 <= s <= 8000 and q == 0), default=files[0])
    fresh = open_archive(url, storage_options=opts, cache=False)
    out["cat_one_file"] = counted(proxy, lambda: fresh.read(small))
    out["cat_file"] = small
    repos = sorted({k.repo for k in arc.groups})  # type: ignore[attr-defined]
    repo = max(repos, key=lambda r: len(arc.select(repo=r)))  # type: ignore[attr-defined]
    out["repo"] = repo
    out["repo_files"] = len(arc.select(repo=repo))  # type: ignore[attr-defined]
    fresh = open_archive(url, storage_options=opts, cache=False)
    out["ls_repo"] = counted(proxy, lambda: fresh.index(repo=repo))
    fresh = open_archive(url, storage_options=opts, cache=False)
    dest = work / "x-repo"
    shutil.rmtree(dest, ignore_errors=True)
    out["extract_repo"] = counted(proxy, lambda: fresh.extract(dest, repo=repo))
    idx = arc.index(repo=repo)  # type: ignore[attr-defined]
    out["extract_repo_stored_bytes"] = sum(idx.column("blob_size").to_pylist())
    fresh = open_archive(url, storage_options=opts, cache=False)
    out["polars_pruned_scan"] = counted(
        proxy, lambda: scan(fresh).filter(pl.col("repo") == repo).collect())
    out["archive_bytes"] = arc.source.size  # type: ignore[attr-defined]
    out["tail_bytes"] = arc.source.size - arc.tail_offset  # type: ignore[attr-defined]
    out["manifest_bytes"] = arc.source.size - arc.manifest_offset  # type: ignore[attr-defined]
    return out


def gap_sweep(url: str, opts: dict[str, str], work: Path,
              rounds: int = 5) -> list[dict[str, object]]:
    """Extract of every 20th file (scattered blobs, gaps of every size) per ``GAP``; the
    gaps alternate within each round, the fastest of ``rounds`` is kept."""
    from znippy_sql import open_archive
    from znippy_sql.remote import source

    sample = open_archive(url, storage_options=opts, cache=False).select()[::20]
    gaps = (0, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20)
    best: dict[int, dict[str, object]] = {}
    saved = source.GAP
    try:
        for _ in range(rounds):
            for gap in gaps:
                source.GAP = gap
                arc = open_archive(url, storage_options=opts, cache=False)
                dest = work / "x-gap"
                shutil.rmtree(dest, ignore_errors=True)
                before = arc.source.requests, arc.source.fetched
                t = time.perf_counter()
                arc.extract(dest, paths=sample)
                s = time.perf_counter() - t
                row = {"gap": gap, "seconds": round(s, 3),
                       "requests": arc.source.requests - before[0],
                       "bytes": arc.source.fetched - before[1]}
                if gap not in best or s < best[gap]["seconds"]:  # type: ignore[operator]
                    best[gap] = row
    finally:
        source.GAP = saved
    return [best[g] for g in gaps]


def cold(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    return time.perf_counter() - t


def walls(url: str, opts: dict[str, str], small: str, corpus: str, work: Path,
          rounds: int) -> dict[str, object]:
    """Cold-process wall times against S3 (SeaweedFS), rounds alternating."""
    exe = str(Path(sys.executable).parent / "znippy-sql")
    so = [f"--storage-option={k}={v}" for k, v in opts.items()]
    bucket_key = url.removeprefix(f"s3://{BUCKET}/")
    get_whole = ("import obstore, sys; from obstore.store import S3Store; "
                 f"s = S3Store({BUCKET!r}, endpoint={opts['endpoint']!r}, "
                 f"access_key_id={ACCESS_KEY!r}, secret_access_key={SECRET_KEY!r}, "
                 "region='us-east-1', client_options={'allow_http': True}); "
                 f"d = obstore.get(s, {bucket_key!r}).bytes(); sys.stdout.write(str(len(d)))")
    local = work / "downloaded.znippy"
    res: dict[str, list[float]] = {"cat_cold": [], "cat_cold_local": [],
                                   "obstore_get_whole_cold": [],
                                   "extract_remote": [], "download_then_extract": []}
    for _ in range(rounds):
        res["cat_cold"].append(cold([exe, "cat", url, small, "--no-cache", *so]))
        res["cat_cold_local"].append(cold([exe, "cat", str(work / Path(url).name), small]))
        res["obstore_get_whole_cold"].append(cold([sys.executable, "-c", get_whole]))
        dest = work / "x-all"
        shutil.rmtree(dest, ignore_errors=True)
        res["extract_remote"].append(cold([exe, "extract", url, "-o", str(dest), "--no-cache",
                                           *so]))
        shutil.rmtree(dest, ignore_errors=True)
        local.unlink(missing_ok=True)
        dl = ("import obstore, sys; from obstore.store import S3Store; "
              f"s = S3Store({BUCKET!r}, endpoint={opts['endpoint']!r}, "
              f"access_key_id={ACCESS_KEY!r}, secret_access_key={SECRET_KEY!r}, "
              "region='us-east-1', client_options={'allow_http': True}); "
              f"open({str(local)!r}, 'wb').write(obstore.get(s, {bucket_key!r}).bytes())")
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", dl], check=True)
        subprocess.run([exe, "extract", str(local), "-o", str(dest)], check=True,
                       stdout=subprocess.DEVNULL)
        res["download_then_extract"].append(time.perf_counter() - t)
        shutil.rmtree(dest, ignore_errors=True)
    out: dict[str, object] = {k: round(statistics.median(v), 3) for k, v in res.items()}
    out["extract_ratio_vs_download_then_extract"] = round(
        statistics.median(res["download_then_extract"]) / statistics.median(res["extract_remote"]),
        2)
    return out


def ratarmount(corpus: str, archive: Path, small: str, work: Path, rounds: int) -> object:
    """``cat`` of one file from a cold start over one HTTP server (ours, counting): ratarmount
    mounting a ``.tar.zst`` of the same tree (it reads the whole archive to build its index)
    against ``znippy-sql cat``. Why not, when ratarmount cannot run here."""
    exe = shutil.which("ratarmount") or str(Path(sys.executable).parent / "ratarmount")
    if not os.path.exists(exe):
        return "not installed (pip install ratarmount)"
    probe = subprocess.run([exe, "--version"], capture_output=True, text=True)
    said = probe.stdout + probe.stderr
    if probe.returncode != 0 or "FUSE installation" in said:
        return "cannot run: " + " ".join(said.split())[:300]
    tar = work / f"{archive.stem}.tar.zst"
    if not tar.exists():
        with open(tar, "wb") as out:
            t = subprocess.Popen(["tar", "-C", corpus, "-cf", "-", "."], stdout=subprocess.PIPE)
            subprocess.run(["zstd", "-q", "-3", "-c"], stdin=t.stdout, stdout=out, check=True)
            t.wait()
    srv = RangeServer()
    mnt = work / "mnt"
    mnt.mkdir(exist_ok=True)
    zurl, turl = srv.put(archive.name, archive.read_bytes()), srv.put(tar.name, tar.read_bytes())
    znippy = str(Path(sys.executable).parent / "znippy-sql")
    res: dict[str, list[float]] = {"ratarmount_s": [], "ratarmount_bytes": [],
                                   "znippy_cat_s": [], "znippy_cat_bytes": []}
    try:
        for _ in range(rounds):
            srv.reset()
            t0 = time.perf_counter()
            proc = subprocess.Popen([exe, "-f", "--index-file", ":memory:", turl, str(mnt)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            target = mnt / small
            while not (os.path.ismount(mnt) and target.exists()):
                if proc.poll() is not None or time.perf_counter() - t0 > 300:
                    raise RuntimeError("ratarmount did not mount")
                time.sleep(0.01)
            target.read_bytes()
            res["ratarmount_s"].append(time.perf_counter() - t0)
            subprocess.run(["fusermount", "-u", str(mnt)], check=True)
            proc.wait()
            res["ratarmount_bytes"].append(srv.bytes_sent())
            srv.reset()
            res["znippy_cat_s"].append(cold([znippy, "cat", zurl, small, "--no-cache"]))
            res["znippy_cat_bytes"].append(srv.bytes_sent())
    finally:
        srv.close()
    out: dict[str, object] = {k: round(statistics.median(v), 3) for k, v in res.items()}
    out["tar_zst_bytes"] = tar.stat().st_size
    out["znippy_bytes"] = archive.stat().st_size
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=0.25)
    ap.add_argument("--work", default=str(HERE / "out" / "remote"))
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    corpora = generate(str(HERE / "out" / "corpora"), scale=args.scale,
                       only=["src_tree", "mixed_repo"], log=lambda s: print(s, file=sys.stderr))
    from obstore.store import S3Store
    import obstore

    from znippy_sql import write_archive

    weed = Seaweed(work / "weed")
    proxy = RangeServer(upstream=("127.0.0.1", weed.port))
    result: dict[str, object] = {"scale": args.scale, "machine_cores": os.cpu_count()}
    try:
        store = S3Store(BUCKET, endpoint=weed.endpoint, access_key_id=ACCESS_KEY,
                        secret_access_key=SECRET_KEY, region="us-east-1",
                        client_options={"allow_http": True})
        for name, root in corpora.items():
            path = work / f"{name}@{args.scale:g}.znippy"
            if not path.exists():
                write_archive(path, entries(root), fsync=False)
            obstore.put(store, path.name, path.read_bytes())
            url = f"s3://{BUCKET}/{path.name}"
            one = plan(url, options(proxy.url), proxy, work)
            one["gap_sweep_extract_sample"] = gap_sweep(url, options(weed.endpoint), work)
            one["wall"] = walls(url, options(weed.endpoint), str(one["cat_file"]), root, work,
                                args.rounds)
            one["ratarmount_http"] = ratarmount(root, path, str(one["cat_file"]), work,
                                                args.rounds)
            result[name] = one
            print(json.dumps({name: one}), file=sys.stderr)
    finally:
        proxy.close()
        weed.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
