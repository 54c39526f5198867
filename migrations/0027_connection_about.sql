-- What a connection's MCP server said it is for at its latest successful discovery (its
-- `initialize` instructions, else its description; one line, at most 500 characters): the
-- `about` of the connection's notice in `/mcp`'s instructions (issue 44).
ALTER TABLE connections ADD COLUMN about text;
