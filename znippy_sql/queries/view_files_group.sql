-- One group's files: the chunk_seq = 0 row (module columns) joined to the per-file sums.
-- {share}(path): the file's share of the blobs it points at (views/shares.py), called only
-- when stored_size is asked for.
SELECT f.relative_path, {repo} AS repo, {pkg_type}::TINYINT AS pkg_type,
       {pkg_type_name} AS pkg_type_name, {module_name} AS module_name,
       s.size, {share}(f.relative_path) AS stored_size, s.blob_size, s.chunks, s.compressed,
       znippy_file_digest(f.relative_path, s.checksums) AS digest {extra}
FROM {table} AS f
JOIN (
    SELECT relative_path,
           sum(uncompressed_size)::UBIGINT AS size,
           sum(blob_size)::UBIGINT AS blob_size,
           count(*)::UINTEGER AS chunks,
           bool_or(compressed) AS compressed,
           list(checksum ORDER BY chunk_seq) AS checksums
    FROM {table}
    GROUP BY relative_path
) AS s ON s.relative_path = f.relative_path
WHERE f.chunk_seq = 0
