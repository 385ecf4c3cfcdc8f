"""The golden git archives: ``.venv/bin/python tests/data/make_git_golden.py NAME``.

``history()`` is a ``git fast-import`` stream with fixed dates, so its object ids are the same
on every machine: a main line, two side branches merged back, an open branch, a pull-request
ref at a merged branch's tip, an annotated tag. The archive is ``git import`` of that
repository (one pack made by ``git repack -a -d``). Regenerating writes the layout of the
code checked out: ``golden-git-v1.znippy`` was written before bitmaps counted pack/traversal
positions (bitmaps over oid ordinals), ``golden-git-v2.znippy`` after. Only regenerate on
purpose; tests/test_git_golden.py reads both and checks every answer against git.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def history() -> bytes:
    out = []
    when = 1_500_000_000
    mark = 0

    def commit(ref: str, files: dict[str, str], parents: list[int]) -> int:
        nonlocal when, mark
        when += 60
        mark += 1
        msg = f"commit {mark}".encode()
        out.append(b"commit %s\nmark :%d\ncommitter C <c@example.com> %d +0000\ndata %d\n%s\n"
                   % (ref.encode(), mark, when, len(msg), msg))
        if parents:
            out.append(b"from :%d\n" % parents[0])
            for p in parents[1:]:
                out.append(b"merge :%d\n" % p)
        for path, text in files.items():
            data = text.encode()
            out.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(data), data))
        out.append(b"\n")
        return mark

    main = [commit("refs/heads/main", {"README": "hello\n"}, [])]
    for i in range(8):
        main.append(commit("refs/heads/main", {f"src/m{i % 3}.py": f"v{i}\n" * (i + 1)},
                           [main[-1]]))
    side = [commit("refs/heads/side", {"side.txt": "s0\n"}, [main[3]])]
    side.append(commit("refs/heads/side", {"side.txt": "s1\n", "docs/a.md": "a\n"}, [side[-1]]))
    main.append(commit("refs/heads/main", {"merged": "1\n"}, [main[-1], side[-1]]))
    pr = [commit("refs/pull/7/head", {"pr.txt": "p0\n"}, [main[-1]])]
    pr.append(commit("refs/pull/7/head", {"pr.txt": "p1\n", "src/m0.py": "pr\n"}, [pr[-1]]))
    for i in range(4):
        main.append(commit("refs/heads/main", {"docs/b.md": f"b{i}\n"}, [main[-1]]))
    main.append(commit("refs/heads/main", {"merged": "2\n"}, [main[-1], pr[-1]]))
    topic = commit("refs/heads/topic", {"topic.txt": "t\n", "src/m1.py": "topic\n"},
                   [main[6]])
    for i in range(3):
        main.append(commit("refs/heads/main", {"src/m2.py": f"late {i}\n"}, [main[-1]]))
    out.append(b"tag v1\nfrom :%d\ntagger T <t@example.com> %d +0000\ndata 3\nv1\n\n"
               % (main[-1], when + 1))
    del topic
    return b"".join(out)


def make_repo(path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=str(path.parent), GIT_CONFIG_NOSYSTEM="1")

    def git(*args: str, input: bytes | None = None) -> None:
        subprocess.run(["git", "-C", str(path), *args], input=input, check=True,
                       capture_output=True, env=env)

    path.mkdir(parents=True)
    git("init", "-q", "--bare", "-b", "main")
    git("fast-import", "--quiet", input=history())
    git("repack", "-a", "-d", "-q")


def main(name: str) -> int:
    sys.path.insert(0, str(HERE.parent.parent))
    from znippy_sql.git.importer import import_repository

    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "golden.git"
        make_repo(repo)
        out = HERE / name
        if out.exists():
            out.unlink()
        import_repository(repo, out)
    print(f"{out}: {out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "golden-git-v2.znippy"))
