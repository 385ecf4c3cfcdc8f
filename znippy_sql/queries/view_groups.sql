-- <name>_groups: one row per data sub-index with its byte range and what it holds.
SELECT g.pkg_type, g.pkg_type_name, g.repo, g.module_name, g.index_offset, g.index_len,
       g.row_count,
       coalesce(a.files, 0)::UBIGINT AS files,
       coalesce(a.size, 0)::UBIGINT AS size,
       coalesce(a.stored_size, 0)::UBIGINT AS stored_size
FROM {groups} AS g
LEFT JOIN (
    SELECT c.pkg_type, c.repo, c.module_name,
           count(*) FILTER (WHERE c.chunk_seq = 0) AS files,
           sum(c.uncompressed_size) AS size,
           sum(c.blob_size) AS stored_size
    FROM {chunks} AS c
    GROUP BY ALL
) AS a ON a.pkg_type = g.pkg_type AND a.repo = g.repo AND a.module_name = g.module_name
ORDER BY g.pkg_type, g.repo, g.module_name
