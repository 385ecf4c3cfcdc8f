-- Table macros over the git views of an archive <name> (docs/git-sections.md). Objects are
-- named as `git rev-parse` takes them: a full id, an unambiguous abbreviation, a branch or tag
-- name, HEAD (git/revparse.py); columns are always qualified (a macro parameter replaces every
-- unqualified name it matches).

-- Commits reachable from a commit (a tag is peeled to its commit), newest first, in
-- `git log --format='%H %P'` order: a shallow boundary commit shows no parents, as in git.
CREATE OR REPLACE TEMP MACRO git_log(name, commit_oid) AS TABLE
    SELECT c.oid,
           CASE WHEN list_contains(w.boundary, c.oid) THEN c.parents[1:0] ELSE c.parents END
               AS parents,
           c.tree, c.generation, c.commit_time, c.corrected_date
    FROM (SELECT unnest(znippy_git_log(s.archive, commit_oid::VARCHAR), recursive := true),
                 znippy_git_shallow(s.archive) AS boundary
          FROM query_table(name || '__archive') AS s) AS w
    JOIN query_table(name || '_git_commits') AS c ON c.oid = w.oid
    ORDER BY w.seq;

-- Every object `git rev-list --objects <name>` lists (a stored bitmap, or one completed
-- from the nearest bitmapped ancestors; a tag adds itself), in ordinal (= oid) order.
CREATE OR REPLACE TEMP MACRO git_reachable(name, commit_oid) AS TABLE
    SELECT o.oid, o.type_name, o.ordinal
    FROM (SELECT unnest(znippy_git_reachable(s.archive, commit_oid::VARCHAR)) AS ord
          FROM query_table(name || '__archive') AS s) AS r
    JOIN query_table(name || '_git_objects') AS o ON o.ordinal = r.ord
    ORDER BY o.ordinal;

-- One object: its type, size and content (the bytes `git cat-file <type> <oid>` prints).
-- A name that is not in the archive is an error.
CREATE OR REPLACE TEMP MACRO git_cat(name, object_id) AS TABLE
    SELECT unnest(g.obj)
    FROM (SELECT znippy_git_cat(s.archive, object_id::VARCHAR) AS obj
          FROM query_table(name || '__archive') AS s) AS g
    WHERE g.obj.type IS NOT NULL;
