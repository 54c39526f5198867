-- Why a connection's tools are unavailable on `/mcp`, as a typed fact (issue 44): `unreachable`
-- (its latest discovery could not reach it, or it did not answer) or `needs_authorization`
-- (its server refused its credential, or the credential could not be resolved), NULL when
-- nothing is known against it. It is set from the runner's typed error, never read out of an
-- error's text: a failed discovery sets either kind (`last_discovery_error` keeps the remote's
-- own words, for people and the log); a call refused for its credential sets
-- `needs_authorization`, recorded in the transaction that records the call. A successful
-- discovery clears it, and so does a call its server answered, of `needs_authorization` only
-- (an answer says nothing of what discovery found). The plain completion statement
-- (`db/calls/complete.rs`) looks a call's connection up by primary key to see whether it
-- must take that path: no index is needed.
ALTER TABLE connections ADD COLUMN unavailable text
    CHECK (unavailable IN ('unreachable', 'needs_authorization'));

-- A discovery that failed before this kept no kind: unreachable until the next one says.
UPDATE connections SET unavailable = 'unreachable' WHERE last_discovery_error IS NOT NULL;
