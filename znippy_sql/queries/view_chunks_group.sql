-- One data sub-index as rows of <name>_chunks: its base columns, the group's constants, then
-- its module columns (the columns of views/files.py CHUNKS, in its order).
SELECT * {exclude}, {repo} AS repo, {pkg_type}::TINYINT AS pkg_type,
       {pkg_type_name} AS pkg_type_name, {module_name} AS module_name {extra}
FROM {table}
