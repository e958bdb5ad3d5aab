-- An agent whose provider refused work (a rate limit, a usage cap) rests:
-- it takes no task before rest_until (nanoseconds since the epoch), and
-- rest_reason says why. A rest whose time has passed is over without a
-- write; the agent's next claim clears it.
ALTER TABLE agents ADD COLUMN rest_until INTEGER;
ALTER TABLE agents ADD COLUMN rest_reason TEXT NOT NULL DEFAULT '';
