-- Table macros over the views that znippy_sql.duckdb.register creates for an archive <name>.
-- Loaded by znippy_sql.duckdb.install(con). Columns are always qualified (f.repo): a macro
-- parameter replaces every unqualified name it matches.

-- The matching files, in path order (UTF-8 byte order, as `znippy-sql ls`).
-- pkg_type is a number or a name ('maven'); glob is matched like Archive.select (fnmatch).
-- ("glob" is quoted: it is a keyword; callers still write glob := '*.jar'.)
CREATE OR REPLACE TEMP MACRO znippy_ls(name, repo := NULL, pkg_type := NULL, "glob" := NULL) AS TABLE
    SELECT f.*
    FROM query_table(name || '_files') AS f
    WHERE (repo IS NULL OR f.repo = repo)
      AND (pkg_type IS NULL OR f.pkg_type = (SELECT znippy_pkg_type(pkg_type::VARCHAR)))
      AND ("glob" IS NULL OR znippy_glob(f.relative_path, "glob"))
    ORDER BY f.relative_path;

-- One file's bytes, found through the fst trie (no table scan), checked against BLAKE3.
-- No row for a path that is not in the archive.
CREATE OR REPLACE TEMP MACRO znippy_cat(name, path) AS TABLE
    SELECT path::VARCHAR AS relative_path, znippy_read(s.archive, path) AS content
    FROM query_table(name || '__archive') AS s
    WHERE znippy_has(s.archive, path);

-- Extract the matching files under dest as `znippy-sql extract` does, through the same
-- Python function (read/extract.py): recorded directories made, links skipped or (symlinks :=
-- true) made when they stay inside dest, preserve := true for modes and mtimes,
-- strip_components, existing := 'replace' | 'error' | 'skip' (tar's --keep-old-files /
-- --skip-old-files). One row per path it dealt with, in path order: relative_path,
-- bytes_written, checksum_ok, status ('extracted', 'link', 'skipped', 'failed'), problem.
-- The UDF runs once per query (one row in, a list out).
CREATE OR REPLACE TEMP MACRO znippy_extract(name, dest, repo := NULL, pkg_type := NULL,
                                       "glob" := NULL, symlinks := false, preserve := false,
                                       strip_components := 0, existing := 'replace') AS TABLE
    SELECT w.relative_path, w.bytes_written, w.checksum_ok, w.status, w.problem
    FROM (
        SELECT unnest(znippy_extract_files(
            (SELECT s.archive FROM query_table(name || '__archive') AS s),
            dest,
            {'repo': repo, 'pkg_type': pkg_type::VARCHAR, 'glob': "glob",
             'symlinks': symlinks, 'preserve': preserve,
             'strip_components': strip_components, 'existing': existing},
            txid_current())) AS w
    );

-- Searchable metadata (the __meta__ section): the facts with this key.
CREATE OR REPLACE TEMP MACRO znippy_meta(name, key) AS TABLE
    SELECT m.relative_path, m.key, m.value
    FROM query_table(name || '_meta') AS m
    WHERE m.key = key
    ORDER BY m.relative_path NULLS FIRST, m.value;
