-- Classifying tools: a tool of a connection's catalog can be called only once a person has
-- classified it (issue 43).
--
-- A classification is two mandatory fields, `side_effect` and `risk`, both NULL while the tool
-- is unclassified (the CHECK keeps them whole). `classified_by`/`classified_at` say who gave
-- it and when. `needs_review` is set when a rediscovery finds a classified tool's annotations
-- changed: the classification stands, flagged, until someone classifies the tool again.
--
-- A tool's state is derived, never stored: its connection retired (`retired_at`) → retired;
-- not listed by the latest discovery (`available = false`) → unavailable; no classification →
-- unclassified; else classified. The submit read reads these columns of the one tool it names
-- by primary key; no index is needed. Tools cached before this migration are unclassified.
ALTER TABLE tools
    ADD COLUMN side_effect boolean,
    ADD COLUMN risk text CHECK (risk IN ('low', 'medium', 'high')),
    ADD COLUMN classified_by uuid REFERENCES users(id),
    ADD COLUMN classified_at timestamptz,
    ADD COLUMN needs_review boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT tools_classification_whole CHECK ((side_effect IS NULL) = (risk IS NULL));
