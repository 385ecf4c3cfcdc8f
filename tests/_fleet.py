"""A small fleet of archives for the engine tests and bench: Maven and raw repos, text and
binary files, several groups in one archive, one archive big enough to be split by group."""

from __future__ import annotations

import os

from znippy_sql import Entry, write_archive

#: (archive stem, [(repo, pkg_type, files)])
FLEET = [
    ("central-a", [("central", "maven", 40)]),
    ("central-b", [("central", "maven", 30), ("snapshots", "maven", 10)]),
    ("src-a", [("src", 0, 25)]),
    ("mixed", [("src", 0, 10), ("docs", 0, 12), ("central", "maven", 8)]),
]


def entries(stem: str, groups: list[tuple[str, object, int]]) -> list[Entry]:
    out = []
    for repo, pkg_type, n in groups:
        for j in range(n):
            if pkg_type == "maven":
                a = f"art{j % 7}"
                v = f"1.{j // 7}"
                base = f"com/acme/{repo}/{a}/{v}/{a}-{v}"
                path = base + (".pom" if j % 2 else ".jar")
                data = (f"<project><artifactId>{a}</artifactId><version>{v}</version>"
                        f"<license>Apache-2.0</license></project>\n".encode() if j % 2
                        else bytes(range(256)) * (j + 1))
            else:
                path = f"{repo}/pkg{j % 3}/mod{j}.txt"
                data = (f"{stem} {repo} line {j}\n" * (j + 1)).encode()
                if j % 5 == 0:
                    data += b"TODO: licence\n"
            out.append(Entry(path, data=data, pkg_type=pkg_type, repo=repo))
    return out


def write_fleet(root: str) -> list[str]:
    os.makedirs(root, exist_ok=True)
    paths = []
    for stem, groups in FLEET:
        p = os.path.join(root, f"{stem}.znippy")
        write_archive(p, entries(stem, groups), fsync=False, workers=1)
        paths.append(p)
    return paths
