-- Table macros over the git views of an archive <name> (docs/git-sections.md). Objects are
-- named as `git rev-parse` takes them: a full id, an unambiguous abbreviation, a branch or tag
-- name, HEAD (git/revparse.py); columns are always qualified (a macro parameter replaces every
-- unqualified name it matches).

-- Commits reachable from a commit (a tag is peeled to its commit), newest first, in
-- `git log --format='%H %P'` order: a shallow boundary commit shows no parents, as in git.
CREATE OR REPLACE TEMP MACRO git_log(name, commit_oid) AS TABLE
    SELECT w.oid,
           CASE WHEN list_contains(w.boundary, w.oid) THEN w.parents[1:0] ELSE w.parents END
               AS parents,
           w.tree, w.generation, w.commit_time, w.corrected_date
    FROM (SELECT unnest(znippy_git_log(s.archive, commit_oid::VARCHAR), recursive := true),
                 znippy_git_shallow(s.archive) AS boundary
          FROM query_table(name || '__archive') AS s) AS w
    ORDER BY w.seq;

-- Every object `git rev-list --objects <name>` lists (a stored bitmap, or one completed
-- from the nearest bitmapped ancestors; a tag adds itself), in ordinal (= oid) order.
-- Both macros take their rows from the UDFs (udfs/git_udfs.py), which read either git tier
-- (this project's packs, the Rust loose objects: git/objects.py), not from the views.
CREATE OR REPLACE TEMP MACRO git_reachable(name, commit_oid) AS TABLE
    SELECT r.oid, r.type_name, r.ordinal
    FROM (SELECT unnest(znippy_git_reachable(s.archive, commit_oid::VARCHAR),
                        recursive := true)
          FROM query_table(name || '__archive') AS s) AS r
    ORDER BY r.ordinal;

-- One object: its type, size and content (the bytes `git cat-file <type> <oid>` prints).
-- A name that is not in the archive is an error.
CREATE OR REPLACE TEMP MACRO git_cat(name, object_id) AS TABLE
    SELECT unnest(g.obj)
    FROM (SELECT znippy_git_cat(s.archive, object_id::VARCHAR) AS obj
          FROM query_table(name || '__archive') AS s) AS g
    WHERE g.obj.type IS NOT NULL;
