"""Provenance benchmark: what signing adds to ``create``, and ``verify --trust`` time.

Usage::

    .venv/bin/python bench/bench_sign.py [--scale 1.0] [--repeat 3] [--workers N]
                                         [--out bench/results-provenance.md]

Corpus: ``src_tree`` from ``bench/corpora.py`` (20,000 source-like files of 1-40 KB at scale 1).
Key: EC P-256 with a self-signed certificate: the fastest key type OpenSSL verifies in CMS
(step 0 measures P-256, Ed25519 and RSA-2048 and writes the table).

0. A micro-benchmark of the bare signature and verification per key type.

1. ``create`` unsigned and signed, alternating, ``--repeat`` times each, in this process
   (``write_archive`` with fsync, as the CLI does); median wall times and the overhead.
2. The signing step alone: ``signature_builder(signer)(lookup)`` on the archive's lookup.
3. ``verify_signatures(archive, trust)`` (no ``--deep``) in a fresh interpreter, import and
   open included; and ``--deep`` for reference.
4. The CLI ``znippy-sql verify ARCHIVE --trust CERT`` wall time, which also runs the core
   content check of every blob (see the notes in the results file).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import corpora  # noqa: E402


def make_pki(d: str) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench signer")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=7))
            .sign(key, hashes.SHA256()))
    kp, cp = os.path.join(d, "key.pem"), os.path.join(d, "cert.pem")
    with open(kp, "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))
    with open(cp, "wb") as fh:
        fh.write(cert.public_bytes(serialization.Encoding.PEM))
    return kp, cp


def micro(n: int = 2000) -> list[tuple[str, float, float]]:
    """CPU microseconds per signature and per check, public ``cryptography`` API, one process:
    (key type, sign, verify). The message is 140 bytes, the size of the signed attributes."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

    msg = bytes(range(140))
    p256 = ec.generate_private_key(ec.SECP256R1())
    ed = ed25519.Ed25519PrivateKey.generate()
    r2048 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ecdsa, pkcs1, sha = ec.ECDSA(hashes.SHA256()), padding.PKCS1v15(), hashes.SHA256()
    cases = [
        ("EC P-256 (ECDSA, SHA-256)", n, lambda: p256.sign(msg, ecdsa),
         lambda sig: p256.public_key().verify(sig, msg, ecdsa)),
        ("Ed25519 (EdDSA)", n, lambda: ed.sign(msg), lambda sig: ed.public_key().verify(sig, msg)),
        ("RSA-2048 (PKCS #1 v1.5, SHA-256)", max(n // 10, 20),
         lambda: r2048.sign(msg, pkcs1, sha),
         lambda sig: r2048.public_key().verify(sig, msg, pkcs1, sha)),
    ]
    best: dict[str, list[float]] = {}
    for _ in range(3):  # interleaved rounds, the least of three: other load only adds time
        for name, count, make, check in cases:
            sig = make()
            check(sig)
            c = time.process_time()
            for _ in range(count):
                make()
            made = (time.process_time() - c) / count * 1e6
            c = time.process_time()
            for _ in range(count):
                check(sig)
            checked = (time.process_time() - c) / count * 1e6
            old = best.setdefault(name, [made, checked])
            best[name] = [min(old[0], made), min(old[1], checked)]
    return [(name, made, checked) for name, (made, checked) in best.items()]


def fresh(code: str) -> float:
    """Run ``code`` in a fresh interpreter; it prints its own seconds as JSON."""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, cwd=ROOT)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--corpora", default=os.path.join(HERE, "out", "corpora"))
    ap.add_argument("--out", default=os.path.join(HERE, "results-provenance.md"))
    args = ap.parse_args()

    from znippy_sql import open_archive, write_archive
    from znippy_sql.provenance.sign import Signer, signature_builder

    import cryptography

    load_before = os.getloadavg()[0]
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    crypto = f"cryptography {cryptography.__version__}"
    key_types = micro()
    src = corpora.generate(args.corpora, scale=args.scale, only=["src_tree"])["src_tree"]
    work = tempfile.mkdtemp(prefix="bench-sign-", dir=os.path.join(HERE, "out"))
    key, cert = make_pki(work)
    signer = Signer.from_files(key, cert)
    plain, signed = os.path.join(work, "plain.znippy"), os.path.join(work, "signed.znippy")

    times: dict[str, list[float]] = {"plain": [], "signed": []}
    idle: dict[str, list[float]] = {"plain": [], "signed": []}
    files = 0
    for _ in range(args.repeat):
        for kind, out, kw in (("plain", plain, {}), ("signed", signed, {"signer": signer})):
            before = _cpu_ticks()
            t = time.perf_counter()
            report = write_archive(out, src, workers=args.workers, **kw)
            times[kind].append(time.perf_counter() - t)
            idle[kind].append(_idle_seconds(before, _cpu_ticks()))
            files = report.files
    plain_s, signed_s = statistics.median(times["plain"]), statistics.median(times["signed"])

    import znippy_sql.provenance.sign as sign_mod
    from znippy_sql.provenance.sign import verify_signatures

    with open_archive(signed) as a:
        lookup = a.lookup
        build = signature_builder(signer)
        t = time.perf_counter()
        sections = list(build(lookup))
        sign_only = time.perf_counter() - t
        sizes = {s.name: len(s.payload) for s in sections}
        # CPU cost in this process alone (no workers): independent of other load
        threshold, sign_mod.POOL_THRESHOLD = sign_mod.POOL_THRESHOLD, 1 << 62
        c = time.process_time()
        list(build(lookup))
        sign_cpu = time.process_time() - c
        c = time.process_time()
        assert verify_signatures(a, cert) == []
        verify_cpu = time.process_time() - c
        sign_mod.POOL_THRESHOLD = threshold

    code = ("import time, json; t = time.perf_counter()\n"
            "from znippy_sql import open_archive\n"
            "from znippy_sql.provenance.sign import verify_signatures\n"
            f"a = open_archive({signed!r}); p = verify_signatures(a, {cert!r}, deep={{deep}})\n"
            "assert p == [], p[:3]\n"
            "print(json.dumps({{'seconds': time.perf_counter() - t}}))")
    verify_s = [fresh(code.format(deep=False)) for _ in range(args.repeat)]
    deep_s = fresh(code.format(deep=True))
    cli = [os.path.join(os.path.dirname(sys.executable), "znippy-sql"), "verify", signed,
           "--trust", cert]
    t = time.perf_counter()
    subprocess.run(cli, check=True, capture_output=True)
    cli_s = time.perf_counter() - t

    overhead = (signed_s - plain_s) / plain_s * 100
    command = " ".join(["python", "bench/bench_sign.py", *sys.argv[1:]])
    per_file = lambda seconds: seconds / max(files, 1) * 1e6  # noqa: E731
    p256 = next(k for k in key_types if k[0].startswith("EC P-256"))
    fastest_sign = min(key_types, key=lambda k: k[1])[0]
    fastest_check = min(key_types, key=lambda k: k[2])[0]
    lines = [
        "# Provenance benchmark: signing and verifying",
        "",
        f"Command: `{command}` (written by `bench/bench_sign.py`), run {when}.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, shared with other work "
        f"while measured (1-minute load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after; a create alone puts ~3 on it); "
        f"Python {platform.python_version()}, {crypto}. Key: EC P-256, self-signed.",
        f"Corpus: `src_tree` at scale {args.scale:g} from `bench/corpora.py`: {files} files of "
        "1-40 KB.",
        "",
        "## Key types (micro-benchmark, public `cryptography` API, CPU per operation)",
        "",
        "| key | sign (us) | verify (us) |",
        "|---|---|---|",
        *[f"| {name} | {made:.0f} | {checked:.0f} |" for name, made, checked in key_types],
        "",
        f"Least of 3 interleaved rounds. Fastest to sign here: {fastest_sign}; fastest to "
        f"check: {fastest_check}. See docs/signing.md for the choice of default.",
        "",
        "## Archive",
        "",
        "| measurement | seconds | target |",
        "|---|---|---|",
        f"| create, unsigned (median of {args.repeat}: {_fmt(times['plain'])}) | {plain_s:.2f} | |",
        f"| create, signed (median of {args.repeat}: {_fmt(times['signed'])}) | {signed_s:.2f} | |",
        f"| signing overhead on create | {signed_s - plain_s:+.2f} ({overhead:+.1f}%) | <= 25% |",
        f"| signing step alone ({files} file signatures + root, from the lookup) | "
        f"{sign_only:.2f} | |",
        f"| `verify_signatures(trust)` without deep, fresh interpreter incl. imports "
        f"(median of {args.repeat}: {_fmt(verify_s)}) | {statistics.median(verify_s):.2f} | < 3 |",
        f"| `verify_signatures(trust, deep=True)`, fresh interpreter | {deep_s:.2f} | |",
        f"| CLI `znippy-sql verify --trust` (core content check of every blob included) | "
        f"{cli_s:.2f} | |",
        f"| CPU time, signing step in one thread ({per_file(sign_cpu):.0f} us a file) | "
        f"{sign_cpu:.2f} | |",
        f"| CPU time, `verify_signatures(trust)` in one thread ({per_file(verify_cpu):.0f} us a "
        f"file) | {verify_cpu:.2f} | |",
        f"| idle CPU of the machine during an unsigned create (median, core-seconds: "
        f"{_fmt(idle['plain'])}) | {statistics.median(idle['plain']):.2f} | |",
        "",
        f"Section sizes: `__sign_artifacts__` {sizes['__sign_artifacts__'] / 1e6:.1f} MB "
        f"({sizes['__sign_artifacts__'] / max(files, 1):.0f} B a file: each CMS carries the "
        f"certificate), `__sign_archive__` {sizes['__sign_archive__']} B.",
        "",
        "Notes:",
        "",
        "- Wall times on this shared machine move by tens of percent from run to run (other "
        "work's tests and benchmarks run on the same 2 CPUs; see the load averages). The CPU "
        "times per signature are the figures to compare between machines.",
        f"- Signing costs {per_file(sign_cpu):.0f} us of CPU a file all told; the bare ECDSA "
        f"P-256 signature alone measures {p256[1]:.0f} us (micro-benchmark above, least of 3), "
        "so the file digest, the CMS bytes around the signature (`cms.SignatureTemplate`) and "
        f"the Arrow section take the other {max(per_file(sign_cpu) - p256[1], 0):.0f} us. "
        "Helper threads share it (OpenSSL runs without the GIL), which helps only when the "
        "second CPU is free: on 2 idle CPUs "
        f"{sign_cpu / 2:.2f} s, i.e. {sign_cpu / 2 / plain_s * 100:.0f}% of the unsigned create "
        f"measured here. Within 25% of this create means the {files} signatures in "
        f"{0.25 * plain_s:.2f} s of wall time after compression, i.e. at most "
        f"{0.25 * plain_s * 2 / max(files, 1) * 1e6:.0f} us of CPU each on 2 CPUs, both "
        "free after compression (signing overlapped with compression was tried and was "
        "slower here: docs/signing.md).",
        f"- Checking costs {per_file(verify_cpu):.0f} us of CPU a file all told; the bare ECDSA "
        f"verification alone measures {p256[2]:.0f} us. The rest is reading the signature "
        "(one full DER walk per "
        "signature length, byte comparison for the others: `cms._Shape`), the trust check "
        "(cached per signer) and the file digests. A fresh interpreter adds ~0.4 s of imports.",
        "- The CLI `verify --trust` time also includes the core verifier's decode of every blob, "
        "which `--trust` without `--deep` does not need (see docs/signing.md).",
        "",
    ]
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines))
    print("\n".join(lines))
    shutil.rmtree(work)


def _cpu_ticks() -> list[int]:
    """The machine's CPU time counters (/proc/stat), for idle time during a run."""
    try:
        with open("/proc/stat") as fh:
            return [int(x) for x in fh.readline().split()[1:]]
    except OSError:
        return []


def _idle_seconds(before: list[int], after: list[int]) -> float:
    """Idle (incl. I/O wait) core-seconds of the whole machine between two readings."""
    if not before or not after:
        return float("nan")
    tick = os.sysconf("SC_CLK_TCK")
    return ((after[3] - before[3]) + (after[4] - before[4])) / tick


def _fmt(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    main()
