package loadtest

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// The db scenario's database is a throwaway cluster it starts and stops
// itself (package pgcluster), never the machine's shared server.

// cdrRows counts the rows of the cdr table at dsn by uniqueid.
func cdrRows(ctx context.Context, dsn string) (map[string]int, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT uniqueid, count(*) FROM cdr GROUP BY uniqueid")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}
