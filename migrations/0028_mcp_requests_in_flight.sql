-- The `tools/call` requests of `/mcp` sessions that are held open, by session and JSON-RPC
-- request id, and the Switchyard call each one became (issue 44: "any replica answers any
-- request"). A client's `notifications/cancelled` may reach another replica than the one
-- holding its request; that replica finds the call here and cancels it.
--
-- `request_id` is the JSON-RPC id as JSON text, so that `7` and `"7"` stay different ids.
-- A row without a call (`call_id` and `workspace_id` NULL) is a cancellation that arrived
-- before its request's call was recorded: the request, when it records its call, finds it
-- and cancels the call at once. Rows go with their session, when the request ends or its
-- cancellation is handled, and by the sweeper after 10 minutes, far longer than any request
-- is held (`db/mcp_requests.rs`). `call_id` has no foreign key: a row is written on the
-- request path, and its call always exists already.
CREATE TABLE mcp_requests_in_flight (
    session_id    text NOT NULL REFERENCES mcp_sessions(id) ON DELETE CASCADE,
    request_id    text NOT NULL,
    workspace_id  uuid,
    call_id       uuid,
    recorded_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, request_id),
    CHECK ((call_id IS NULL) = (workspace_id IS NULL))
);

CREATE INDEX mcp_requests_in_flight_recorded ON mcp_requests_in_flight (recorded_at);
