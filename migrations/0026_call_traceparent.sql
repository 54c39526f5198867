-- The W3C trace context a call's client sent (`traceparent`, e.g. in an `/mcp` tools/call's
-- `_meta`), carried to the MCP server in the `tools/call` the runner sends, so the server's
-- spans join the client's trace. NULL when the client sent none: the runner then derives one
-- from the call and request ids (`mcp-runner/src/meta.rs`). Never part of the payload digest:
-- retries of one request may carry different trace contexts.
ALTER TABLE calls ADD COLUMN traceparent text;
