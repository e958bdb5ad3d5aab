-- The names of the daemon's environment variables each run of an agent
-- gets (JSON array: models.AgentSettings.PassEnv); never their values.
ALTER TABLE agents ADD COLUMN pass_env TEXT NOT NULL DEFAULT '[]';
