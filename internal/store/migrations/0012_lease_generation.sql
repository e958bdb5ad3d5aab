-- Each acquisition of the daemon lease gets the next generation; a release
-- keeps the row (owner emptied) so generations never repeat. Every write
-- transaction of a daemon checks that the lease still has its owner and
-- generation (fencing).
ALTER TABLE daemon_lease ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
