-- <name>_git_objects: __gunnar_oid__ decoded, with the path of each object's pack file.
SELECT o.oid, o.ordinal, o.pack_row, p.relative_path AS pack_path, o.offset, o.type,
       o.type_name
FROM {objects} AS o
LEFT JOIN {packs} AS p ON p.pack_row = o.pack_row
