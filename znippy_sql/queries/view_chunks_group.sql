-- One data sub-index as rows of <name>_chunks: its columns plus the group's constants.
SELECT * {exclude}, {repo} AS repo, {pkg_type}::TINYINT AS pkg_type,
       {pkg_type_name} AS pkg_type_name, {module} AS module_name
FROM {table}
