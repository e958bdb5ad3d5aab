package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/proc"
)

// processAlive reports whether a process with pid exists on this host.
// It is a variable so tests can stand in for the operating system.
var processAlive = proc.Exists

// AcquireLease makes h the database's daemon until now+ttl. It fails with a
// conflict naming the holder when another owner holds an unexpired lease,
// unless that holder ran on the same host and its process is gone (a crash).
func (s *Store) AcquireLease(ctx context.Context, h models.LeaseHolder, ttl time.Duration) error {
	if h.Owner == "" || ttl <= 0 {
		return errors.New("acquire lease: owner and a positive ttl are required")
	}
	now := s.now()
	var gen int64
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		cur, err := readLease(ctx, tx)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err == nil && cur.Owner != "" && cur.Owner != h.Owner && cur.ExpiresAt.After(now) {
			// On the same host, a holder whose process is gone crashed. A
			// holder with our own pid is not taken over: two containers
			// given the same hostname both run as pid 1, and taking a live
			// lease is worse than waiting for a dead one to expire.
			crashed := cur.Hostname == h.Hostname && cur.PID != h.PID && !processAlive(cur.PID)
			if !crashed {
				return models.Errorf(models.CodeConflict,
					"the database is in use by another agentqueued daemon (owner %s, host %s, pid %d, lease expires %s)",
					cur.Owner, cur.Hostname, cur.PID, cur.ExpiresAt.Format(time.RFC3339))
			}
			s.log.Warn("taking over the lease of a daemon that is gone", "owner", cur.Owner, "pid", cur.PID)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO daemon_lease (id, owner, hostname, pid, acquired_at, renewed_at, expires_at, generation)
			VALUES (1, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, hostname = excluded.hostname,
			pid = excluded.pid, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, expires_at = excluded.expires_at,
			generation = daemon_lease.generation + 1`,
			h.Owner, h.Hostname, h.PID, toNanos(now), toNanos(now), toNanos(now.Add(ttl)))
		if err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, "SELECT generation FROM daemon_lease WHERE id = 1").Scan(&gen)
	})
	if err != nil {
		return fmt.Errorf("acquire lease: %w", err)
	}
	// From now on every write transaction of this store checks that the
	// lease is still this one.
	s.fence.Store(&fence{owner: h.Owner, generation: gen, ttl: ttl})
	return nil
}

// fence is the lease a store's writes and its daemon's acts are made
// under: its owner and generation, and the ttl it is renewed with.
type fence struct {
	owner      string
	generation int64
	ttl        time.Duration
}

// LeaseGeneration returns the generation of the lease this store holds
// (each acquisition gets the next one), or 0 when it holds none.
func (s *Store) LeaseGeneration() int64 {
	if f := s.fence.Load(); f != nil {
		return f.generation
	}
	return 0
}

// checkFence refuses a write transaction of a store whose lease has been
// taken over: a daemon paused past its lease's expiry (SIGSTOP, a stalled
// disk) while another took over must not write once it wakes. It reads the
// lease inside the transaction, so the check and the write are atomic.
func (s *Store) checkFence(ctx context.Context, tx *sql.Tx) error {
	f := s.fence.Load()
	if f == nil {
		return nil
	}
	var (
		owner string
		gen   int64
		host  string
		pid   int
	)
	err := s.txQueryRow(ctx, tx, "SELECT owner, generation, hostname, pid FROM daemon_lease WHERE id = 1").Scan(&owner, &gen, &host, &pid)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("check the lease: %w", err)
	}
	return f.deposed(err != nil, owner, gen, host, pid)
}

// deposed returns ErrLeaseLost, saying who holds the lease now, when the
// lease read (none when missing) is no longer f; nil when it still is.
func (f *fence) deposed(missing bool, owner string, gen int64, host string, pid int) error {
	if missing || owner == "" {
		return fmt.Errorf("%w: no daemon holds it now", ErrLeaseLost)
	}
	if owner != f.owner || gen != f.generation {
		return fmt.Errorf("%w: generation %d is held by owner %s (host %s, pid %d); this daemon held generation %d",
			ErrLeaseLost, gen, owner, host, pid, f.generation)
	}
	return nil
}

// ErrLeaseLost is the error of a write, or an act outside the database,
// refused because this daemon's lease on the database has been taken over
// or released (models.ErrLeaseLost).
var ErrLeaseLost = models.ErrLeaseLost

// ErrLeaseExpiring is the error of an act outside the database refused
// because this daemon's lease has less than its act margin left
// (models.ErrLeaseExpiring; see ConfirmLease).
var ErrLeaseExpiring = models.ErrLeaseExpiring

// LeaseActShare sets the act margin: an act outside the database needs at
// least ttl/LeaseActShare of the lease left (5 s of the default 30 s).
// Renewals come every third of the ttl, so the margin is reached only
// after two renewals in a row have failed, and it ends the daemon's acts
// that long before another daemon may take the lease.
const LeaseActShare = 6

// ConfirmLease is the fence of an act outside the database that could
// hurt another daemon's work: a signal to a process group, the cleanup or
// reset of a checkout, a git write, the deletion of files under the data
// directory. Called immediately before the act, it confirms in the
// database that this store's lease is still the current one (owner and
// generation), and that it has at least the act margin left
// (ttl/LeaseActShare): a daemon that cannot renew stops acting before its
// lease can expire, and another daemon can take the lease over only once
// the margin has passed since the check. It fails with ErrLeaseLost when
// the lease was taken over or released (the daemon is deposed and must
// stand down) and with ErrLeaseExpiring when too little of it is left. A
// store that holds no lease confirms every act.
//
// It reads on the read pool, not the writer: a read transaction sees
// every commit made before it began, a takeover included, and does not
// wait behind this daemon's own writes. No lock is held through the act:
// the margin bounds the time between the check and the act.
func (s *Store) ConfirmLease(ctx context.Context) error {
	f := s.fence.Load()
	if f == nil {
		return nil
	}
	var (
		owner, host  string
		gen, expires int64
		pid          int
	)
	err := s.rdb.QueryRowContext(ctx, "SELECT owner, generation, hostname, pid, expires_at FROM daemon_lease WHERE id = 1").
		Scan(&owner, &gen, &host, &pid, &expires)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("confirm the lease: %w", err)
	}
	if err := f.deposed(err != nil, owner, gen, host, pid); err != nil {
		return err
	}
	margin := f.ttl / LeaseActShare
	if left := fromNanos(expires).Sub(s.now()); left < margin {
		return fmt.Errorf("%w (%s left of generation %d, an act needs %s)", ErrLeaseExpiring,
			max(left, 0).Round(time.Millisecond), gen, margin)
	}
	return nil
}

func readLease(ctx context.Context, tx *sql.Tx) (models.LeaseHolder, error) {
	var (
		h       models.LeaseHolder
		expires int64
	)
	err := tx.QueryRowContext(ctx, "SELECT owner, hostname, pid, expires_at FROM daemon_lease WHERE id = 1").
		Scan(&h.Owner, &h.Hostname, &h.PID, &expires)
	h.ExpiresAt = fromNanos(expires)
	return h, err
}

// RenewLease extends owner's lease to now+ttl; it fails with a conflict when
// owner no longer holds it.
func (s *Store) RenewLease(ctx context.Context, owner string, ttl time.Duration) error {
	now := s.now()
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE daemon_lease SET renewed_at = ?, expires_at = ? WHERE id = 1 AND owner = ?",
			toNanos(now), toNanos(now.Add(ttl)), owner)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return models.Errorf(models.CodeConflict, "lease lost: owner %s no longer holds it", owner)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("renew lease: %w", err)
	}
	if f := s.fence.Load(); f != nil && f.owner == owner && f.ttl != ttl {
		s.fence.Store(&fence{owner: f.owner, generation: f.generation, ttl: ttl})
	}
	return nil
}

// ReleaseLease gives up owner's lease; releasing a lease one does not hold
// does nothing. The row stays, its owner emptied, so that generations keep
// counting; the store writes nothing more afterwards.
func (s *Store) ReleaseLease(ctx context.Context, owner string) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE daemon_lease SET owner = '', hostname = '', pid = 0, expires_at = 0
			WHERE id = 1 AND owner = ?`, owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	return nil
}

// LeaseHolder returns the current lease, or not_found when none is held.
func (s *Store) LeaseHolder(ctx context.Context) (models.LeaseHolder, error) {
	var (
		h       models.LeaseHolder
		expires int64
	)
	err := s.rdb.QueryRowContext(ctx, "SELECT owner, hostname, pid, expires_at FROM daemon_lease WHERE id = 1").
		Scan(&h.Owner, &h.Hostname, &h.PID, &expires)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && h.Owner == "") {
		return h, models.Errorf(models.CodeNotFound, "no daemon holds the lease")
	}
	if err != nil {
		return h, fmt.Errorf("read lease: %w", err)
	}
	h.ExpiresAt = fromNanos(expires)
	return h, nil
}
