-- The pypi module's macros (UDFs in udfs/module_udfs.py): the answers of `znippy-sql pypi ...`.
-- Installed by register for an archive with a pypi group.

-- The versions of a Python project (name normalised as PEP 503 says) in PEP 440 order.
CREATE OR REPLACE TEMP MACRO pypi_versions(name, pkg) AS TABLE
    WITH pf AS (
        SELECT f.pypi_version AS v, f.pypi_kind AS kind
        FROM query_table(name || '_files') AS f
        WHERE f.module_name = 'pypi' AND f.pypi_version IS NOT NULL
          AND f.pypi_name = lower(regexp_replace(pkg, '[-_.]+', '-', 'g'))),
    ranked AS (
        SELECT unnest(s.l) AS v, generate_subscripts(s.l, 1) AS ordinal
        FROM (SELECT pypi_sort_versions(list(DISTINCT pf.v)) AS l FROM pf) AS s)
    SELECT r.v AS version, count(*) AS files,
           count(*) FILTER (WHERE pf.kind = 'wheel') AS wheels,
           count(*) FILTER (WHERE pf.kind = 'sdist') AS sdists
    FROM ranked AS r JOIN pf ON pf.v = r.v
    GROUP BY r.v, r.ordinal
    ORDER BY r.ordinal;
