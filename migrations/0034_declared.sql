-- What `switchyard apply` declared (issue 45). A connection or agent that a declarative file
-- created, or adopted from an export, is marked `declared`; apply retires a connection or
-- revokes an agent whose section left the file only when it is declared, so a connection or
-- agent someone made by hand is never retired by applying a file that does not mention it.
-- Everything made before this migration was made by hand: false.
ALTER TABLE connections ADD COLUMN declared boolean NOT NULL DEFAULT false;
ALTER TABLE agents ADD COLUMN declared boolean NOT NULL DEFAULT false;
