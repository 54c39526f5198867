-- Capture exclusions: what Switchyard keeps of a connection's calls (for every tool, `tool_name`
-- '', or for one tool). `capture_nothing` keeps no arguments, result or evidence, only the
-- disposition (state, error code, times); otherwise the named top-level argument fields and
-- result fields are dropped before the result is bounded, stored or captured. Completions of
-- calls an exclusion applies to are recorded in a transaction that applies it, never by the
-- one-statement path, whose guard names this table's key (connection_id, tool_name).
CREATE TABLE capture_exclusions (
    connection_id         uuid NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
    tool_name             text NOT NULL,
    capture_nothing       boolean NOT NULL,
    drop_argument_fields  text[] NOT NULL,
    drop_result_fields    text[] NOT NULL,
    updated_by            uuid NOT NULL REFERENCES users(id),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (connection_id, tool_name),
    CHECK (capture_nothing OR cardinality(drop_argument_fields) + cardinality(drop_result_fields) > 0)
);
