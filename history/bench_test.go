package history

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/dbtest"
	"github.com/ctibridge/ctibridge/sqldb"
	"github.com/jackc/pgx/v5"
)

// BenchmarkInsert measures the CDR write path on PostgreSQL: batches of
// 500 (the Recorder's default), idempotent inserts.
//
//	go test -run '^$' -bench Insert -benchtime 20x ./history/
func BenchmarkInsert(b *testing.B) {
	s := NewPostgres(openPostgres(b, postgresDSN(b)), Config{})
	const batch = 500
	n := 0
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		cdrs := make([]CDR, batch)
		for i := range cdrs {
			n++
			cdrs[i] = CDR{CallDate: t0.Add(time.Duration(n) * time.Second), Src: "201", Dst: "0721405516", CLID: `"Alice" <201>`,
				Channel: "PJSIP/201-00000001", DstChannel: "PJSIP/trunk-00000002", LastApp: "Dial", LastData: "PJSIP/trunk/0721405516",
				Duration: 30, Billsec: 25, Disposition: "ANSWERED", UniqueID: "b." + strconv.Itoa(n), LinkedID: "b." + strconv.Itoa(n)}
		}
		if err := s.Insert(context.Background(), cdrs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "rows/s")
}

func postgresDSN(b *testing.B) string {
	if dsn := os.Getenv("CTIBRIDGE_BENCH_DATABASE"); dsn != "" {
		return dsn // a database kept between runs (the 5M rows take minutes)
	}
	return dbtest.Postgres(b)
}

// seed5M fills cdr with rows CDRs over 2025 by COPY, unless it already
// holds them: 600 extensions, 40% internal, 30% in, 30% out, 1-3 legs
// per call.
func seedCDRs(b *testing.B, s *SQLStore, rows int) {
	pool := sqldb.Pool(s.c)
	ctx := context.Background()
	var have int
	pool.QueryRow(ctx, `SELECT count(*) FROM cdr`).Scan(&have)
	if have >= rows {
		return
	}
	start := time.Now()
	r := rand.New(rand.NewPCG(7, 7))
	year := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	span := int64(365 * 24 * 3600)
	made := have
	for made < rows {
		chunk := make([][]any, 0, 100000)
		for len(chunk) < cap(chunk) && made < rows {
			ext := strconv.Itoa(200 + r.IntN(600))
			other := strconv.Itoa(200 + r.IntN(600))
			ext2 := fmt.Sprintf("3%09d", r.IntN(1e9))
			src, dst := ext, other
			switch r.IntN(10) {
			case 0, 1, 2:
				src, dst = ext2, ext
			case 3, 4, 5:
				dst = ext2
			}
			at := year.Add(time.Duration(r.Int64N(span)) * time.Second)
			link := fmt.Sprintf("%d.%d", at.Unix(), made)
			legs := 1 + r.IntN(3)
			for l := 0; l < legs && made < rows; l++ {
				disp := "NO ANSWER"
				if l == legs-1 {
					disp = "ANSWERED"
				}
				chunk = append(chunk, []any{at.Add(time.Duration(l) * time.Second), `"" <` + src + `>`, src, dst, "from-internal",
					"PJSIP/" + src + "-1", "PJSIP/" + dst + "-2", "Dial", "", 30, 20, disp, "DOCUMENTATION", "",
					link, link, "", l, "", ""})
				made++
			}
		}
		cols := []string{"calldate", "clid", "src", "dst", "dcontext", "channel", "dstchannel", "lastapp", "lastdata", "duration",
			"billsec", "disposition", "amaflags", "accountcode", "uniqueid", "linkedid", "userfield", "sequence", "peeraccount", "recordingfile"}
		if _, err := pool.CopyFrom(ctx, pgx.Identifier{"cdr"}, cols, pgx.CopyFromRows(chunk)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "ANALYZE cdr"); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d rows in %v", rows-have, time.Since(start))
}

func benchRows() int {
	if n, err := strconv.Atoi(os.Getenv("CTIBRIDGE_BENCH_ROWS")); err == nil && n > 0 {
		return n
	}
	return 5000000
}

// BenchmarkPersonalMonth: one extension's calls over one month, first
// page of 50, on a 5,000,000-row table (CTIBRIDGE_BENCH_ROWS). Slow to
// seed: set CTIBRIDGE_BENCH_DATABASE to a database to keep the rows.
//
//	go test -run '^$' -bench PersonalMonth -benchtime 200x -timeout 30m ./history/
func BenchmarkPersonalMonth(b *testing.B) {
	s := NewPostgres(openPostgres(b, postgresDSN(b)), Config{})
	seedCDRs(b, s, benchRows())
	from := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		q := Query{From: from, To: from.AddDate(0, 1, 0), Extensions: []string{strconv.Itoa(200 + i%600)}, Limit: 50}
		p, err := s.Calls(context.Background(), q)
		if err != nil || len(p.Rows) == 0 {
			b.Fatal(err, len(p.Rows))
		}
	}
}

// BenchmarkSwitchboardDay: the whole switchboard, one day, first page.
func BenchmarkSwitchboardDay(b *testing.B) {
	s := NewPostgres(openPostgres(b, postgresDSN(b)), Config{})
	seedCDRs(b, s, benchRows())
	from := time.Date(2025, 6, 3, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Calls(context.Background(), Query{From: from, To: from.AddDate(0, 0, 1), Limit: 50}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExportCSV100k streams 100,000 legs as CSV and reports the
// largest live heap seen while doing it (constant memory: it does not
// grow with the rows).
//
//	go test -run '^$' -bench ExportCSV -benchtime 3x ./history/
func BenchmarkExportCSV100k(b *testing.B) {
	s := NewPostgres(openPostgres(b, postgresDSN(b)), Config{})
	seedExport(b, s, 100000)
	q := Query{From: t0, To: t0.Add(30 * 24 * time.Hour)}
	b.ReportAllocs()
	var peak uint64
	for b.Loop() {
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		w := &sampler{every: 1 << 20}
		if err := ExportCSV(context.Background(), s, q, w, time.UTC, nil, 5); err != nil {
			b.Fatal(err)
		}
		if w.peak > base.HeapAlloc {
			peak = max(peak, w.peak-base.HeapAlloc)
		}
		b.SetBytes(w.n)
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak_heap_MiB")
}

// sampler discards what it is given and samples the live heap every
// `every` bytes.
type sampler struct {
	n, next, every int64
	peak           uint64
}

func (s *sampler) Write(p []byte) (int, error) {
	s.n += int64(len(p))
	if s.n >= s.next {
		s.next = s.n + s.every
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		s.peak = max(s.peak, m.HeapAlloc)
	}
	return len(p), nil
}

var _ io.Writer = (*sampler)(nil)

func seedExport(b *testing.B, s *SQLStore, n int) {
	rows := make([][]any, n)
	for i := range rows {
		link := "e." + strconv.Itoa(i)
		rows[i] = []any{t0.Add(time.Duration(i) * 10 * time.Second), `"Alice" <201>`, "201", "0721405516", "from-internal",
			"PJSIP/201-1", "PJSIP/trunk-2", "Dial", "PJSIP/trunk/0721405516", 30, 20, "ANSWERED", "DOCUMENTATION", "", link, link, "", 0, "", ""}
	}
	cols := []string{"calldate", "clid", "src", "dst", "dcontext", "channel", "dstchannel", "lastapp", "lastdata", "duration",
		"billsec", "disposition", "amaflags", "accountcode", "uniqueid", "linkedid", "userfield", "sequence", "peeraccount", "recordingfile"}
	if _, err := sqldb.Pool(s.c).CopyFrom(context.Background(), pgx.Identifier{"cdr"}, cols, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
}
