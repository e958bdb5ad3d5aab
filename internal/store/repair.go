package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"
)

// ledgerTrigger is the trigger that keeps the token ledger append-only.
const ledgerTrigger = "token_ledger_no_update"

// repairTokenTotals runs when the store opens. Token counts that an older
// daemon let in unbounded (an agent once reported 5e18 tokens twice) left
// ledger rows beyond any plausible count and project or agent totals that
// overflowed SQLite's integers into floating point or wrapped negative;
// such a total cannot be read, and every scheduling pass and budget report
// failed on it. Ledger counts outside [0, MaxTokensPerRecord] are clamped
// to that range (the ledger's append-only trigger is lifted for this
// transaction alone), and every total that is not a readable non-negative
// integer, or whose project or agent had a clamped ledger row, is summed
// again from the ledger, saturating. Each repair is logged.
func (s *Store) repairTokenTotals(ctx context.Context) error {
	cols := []string{"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"}
	var bad []string
	for _, c := range cols {
		bad = append(bad, fmt.Sprintf("typeof(%[1]s) != 'integer' OR %[1]s < 0 OR %[1]s > %[2]d", c, int64(MaxTokensPerRecord)))
	}
	anyBad := strings.Join(bad, " OR ")
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		owners := map[string]map[string]bool{"projects": {}, "agents": {}}
		rows, err := tx.QueryContext(ctx, "SELECT DISTINCT project_id, agent_id FROM token_ledger WHERE "+anyBad)
		if err != nil {
			return err
		}
		for rows.Next() {
			var p, a string
			if err := rows.Scan(&p, &a); err != nil {
				rows.Close()
				return err
			}
			owners["projects"][p] = true
			if a != "" {
				owners["agents"][a] = true
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(owners["projects"]) > 0 {
			var def string
			if err := tx.QueryRowContext(ctx, "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?",
				ledgerTrigger).Scan(&def); err != nil {
				return fmt.Errorf("read the ledger's trigger: %w", err)
			}
			if _, err := tx.ExecContext(ctx, "DROP TRIGGER "+ledgerTrigger); err != nil {
				return err
			}
			clamped := int64(0)
			for i, c := range cols {
				res, err := tx.ExecContext(ctx, fmt.Sprintf("UPDATE token_ledger SET %[1]s = CASE WHEN %[1]s < 0 THEN 0 ELSE %[2]d END WHERE %[3]s",
					c, int64(MaxTokensPerRecord), bad[i]))
				if err != nil {
					return err
				}
				n, _ := res.RowsAffected()
				clamped += n
			}
			if _, err := tx.ExecContext(ctx, def); err != nil {
				return fmt.Errorf("restore the ledger's trigger: %w", err)
			}
			// The usage buckets' tokens summed the clamped rows: filled
			// again from the ledger (see fillTokenBuckets).
			if _, err := tx.ExecContext(ctx, qTokensUnfilled); err != nil {
				return err
			}
			s.log.Warn("token ledger counts beyond any plausible report were clamped", "counts", clamped,
				"max_per_count", int64(MaxTokensPerRecord))
		}
		for _, t := range []struct{ table, key string }{{"projects", "project_id"}, {"agents", "agent_id"}} {
			rows, err := tx.QueryContext(ctx, "SELECT id FROM "+t.table+
				" WHERE typeof(total_tokens_used) != 'integer' OR total_tokens_used < 0")
			if err != nil {
				return err
			}
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return err
				}
				owners[t.table][id] = true
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			ids := make([]string, 0, len(owners[t.table]))
			for id := range owners[t.table] {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			for _, id := range ids {
				// total() sums in floating point: it cannot overflow.
				var sum float64
				if err := tx.QueryRowContext(ctx, "SELECT total(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens) "+
					"FROM token_ledger WHERE "+t.key+" = ?", id).Scan(&sum); err != nil {
					return err
				}
				n := int64(math.MaxInt64)
				if sum < math.MaxInt64 {
					n = int64(sum)
				}
				res, err := tx.ExecContext(ctx, "UPDATE "+t.table+" SET total_tokens_used = ? WHERE id = ?", n, id)
				if err != nil {
					return err
				}
				if k, _ := res.RowsAffected(); k == 1 {
					s.log.Warn("a token total was summed again from the ledger", "table", t.table, "id", id, "total", n)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("repair token totals: %w", err)
	}
	return nil
}
