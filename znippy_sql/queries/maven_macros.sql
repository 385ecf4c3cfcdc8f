-- The maven module's macros (UDFs in udfs/module_udfs.py): the answers of `znippy-sql maven ...`.
-- Installed by register for an archive with a maven group.
-- The versions of 'groupId:artifactId' in Maven's order (ComparableVersion): its files and
-- whether a POM (no classifier) is there.
CREATE OR REPLACE TEMP MACRO maven_versions(name, ga) AS TABLE
    WITH mf AS (
        SELECT f.maven_version AS v, f.maven_extension AS ext, f.maven_classifier AS cls
        FROM query_table(name || '_files') AS f
        WHERE f.module_name = 'maven' AND f.maven_version IS NOT NULL
          AND f.maven_group_id = split_part(ga, ':', 1)
          AND f.maven_artifact_id = split_part(ga, ':', 2)),
    ranked AS (
        SELECT unnest(s.l) AS v, generate_subscripts(s.l, 1) AS ordinal
        FROM (SELECT maven_sort_versions(list(DISTINCT mf.v)) AS l FROM mf) AS s)
    SELECT r.v AS version, count(*) AS files,
           bool_or(mf.ext = 'pom' AND mf.cls IS NULL) AS pom
    FROM ranked AS r JOIN mf ON mf.v = r.v
    GROUP BY r.v, r.ordinal
    ORDER BY r.ordinal;

-- The dependency closure of 'groupId:artifactId:version' from the POMs in the archive, as
-- `znippy-sql maven ARCHIVE deps`: one row per artifact in tree order (missing/reason set
-- when it is not all there), then the problems of the root itself. scope: compile, runtime,
-- test (default test: all of them; a UDF given NULL would answer NULL).
CREATE OR REPLACE TEMP MACRO maven_deps(name, gav, scope := NULL) AS TABLE
    SELECT unnest(maven_closure(
        (SELECT s.archive FROM query_table(name || '__archive') AS s), gav,
        coalesce(scope, 'test')),
        recursive := true);
