-- The header a connection of auth kind `token` sends its static token in (issue 45), kept
-- with its auth settings so that `switchyard auth` sets the token there and `config export`
-- writes it. NULL means `Authorization`, with the `Bearer ` prefix.
--
-- `PUT …/connections/{c}/auth` replaces it with the other settings (left out: NULL). Only a
-- `token` connection has one: the app refuses it under another kind, and the check makes a
-- kind change that would leave one behind fail instead of keeping a header nothing sends.
ALTER TABLE connection_auth ADD COLUMN header text;
ALTER TABLE connection_auth ADD CONSTRAINT connection_auth_header_only_for_token
    CHECK (header IS NULL OR kind = 'token');
