-- One group's files when every file is one chunk (the archive has as many files as rows):
-- a projection of the sub-index, no aggregation; the digest UDF runs only when selected, and
-- so does {share}(path), the file's share of its blob (views/shares.py).
SELECT relative_path, {repo} AS repo, {pkg_type}::TINYINT AS pkg_type,
       {pkg_type_name} AS pkg_type_name, {module_name} AS module_name,
       uncompressed_size AS size, {share}(relative_path) AS stored_size, blob_size,
       1::UINTEGER AS chunks, compressed,
       znippy_file_digest(relative_path, [checksum]) AS digest {extra}
FROM {table}
