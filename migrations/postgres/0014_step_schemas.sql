-- A step's expected output schema, stored once per distinct schema: every call of a tool (and
-- every model call) expects the same one, so the steps refer to it by digest
-- (`{"$ref": "step_schemas/<digest>"}` in steps.expected_output_schema) instead of each holding a
-- copy (about 1 KB of a tool turn's 13 KB). Rows are shared and never change; older steps keep
-- their own copies.

CREATE TABLE step_schemas (
    digest TEXT PRIMARY KEY,
    body   TEXT NOT NULL
);
