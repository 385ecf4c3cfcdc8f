-- <name>_groups: one row per data sub-index with its byte range and what it holds
-- (the columns of views/files.py GROUPS_SCHEMA, in its order); stored_size: the sum of its
-- files' shares of the blobs ({share}, views/shares.py).
SELECT {columns},
       coalesce(a.files, 0)::UBIGINT AS files,
       coalesce(a.size, 0)::UBIGINT AS size,
       coalesce(a.stored_size, 0)::UBIGINT AS stored_size,
       coalesce(a.compressed_chunks, 0)::UBIGINT AS compressed_chunks
FROM {groups} AS g
LEFT JOIN (
    SELECT c.pkg_type, c.repo, c.module_name,
           count(*) FILTER (WHERE c.chunk_seq = 0) AS files,
           sum(c.uncompressed_size) AS size,
           sum({share}(c.relative_path)) FILTER (WHERE c.chunk_seq = 0) AS stored_size,
           count(*) FILTER (WHERE c.compressed) AS compressed_chunks
    FROM {chunks} AS c
    GROUP BY ALL
) AS a ON a.pkg_type = g.pkg_type AND a.repo = g.repo AND a.module_name = g.module_name
ORDER BY g.pkg_type, g.repo, g.module_name
