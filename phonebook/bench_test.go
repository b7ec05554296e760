package phonebook

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/sqldb"
	"github.com/jackc/pgx/v5"
)

var (
	firstNames = []string{"Mario", "Luigi", "Anna", "Giulia", "Marco", "Francesca", "Paolo", "Chiara", "Luca", "Sara", "Andrea", "Elena", "Giorgio", "Marta", "Davide", "Laura"}
	surnames   = []string{"Rossi", "Russo", "Ferrari", "Esposito", "Bianchi", "Romano", "Colombo", "Ricci", "Marino", "Greco", "Bruno", "Gallo", "Conti", "De Luca", "Mancini", "Costa", "Giordano", "Rizzo", "Lombardi", "Moretti"}
	companies  = []string{"ACME", "Initech", "Globex", "Umbrella", "Hooli", "Vandelay", "Stark", "Wayne", "Tyrell", "Cyberdyne"}
)

// seedPostgres fills the store with n public contacts by COPY.
func seedPostgres(b *testing.B, s *SQLStore, n int) {
	pool := sqldb.Pool(s.c)
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([][]any, n)
	for i := range rows {
		c := Contact{Type: TypePublic, Name: fmt.Sprintf("%s %s %d", firstNames[r.IntN(len(firstNames))], surnames[r.IntN(len(surnames))], i),
			Company:   fmt.Sprintf("%s %d", companies[r.IntN(len(companies))], r.IntN(1000)),
			WorkPhone: fmt.Sprintf("+39 0%d %06d", 100+r.IntN(900), r.IntN(1000000)), CellPhone: fmt.Sprintf("3%09d", r.IntN(1000000000)), Source: "cti"}
		rows[i] = []any{c.OwnerID, c.Type, c.Name, c.Company, c.WorkPhone, c.CellPhone, c.Source, searchText(&c), s.numbersText(&c), int64(0)}
	}
	_, err := pool.CopyFrom(context.Background(), pgx.Identifier{"phonebook_contacts"},
		[]string{"owner_id", "type", "name", "company", "workphone", "cellphone", "source", "search", "numbers", "updated_at"}, pgx.CopyFromRows(rows))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), "ANALYZE phonebook_contacts"); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSearch100k measures search over 100,000 public contacts on
// PostgreSQL with 50 concurrent searchers and reports latency
// percentiles: "book" is Book.Search (public contacts in memory, the
// viewer's own from memory, loaded at their first search), "book-ownsql"
// the same with the viewer's own contacts by SQL on every search (OwnTTL
// negative), "sql" is Store.Search alone. Terms are a name with
// a number (a few hits), a surname fragment (thousands of hits, one page),
// a phone number fragment and a company. The viewer owns 50 private
// contacts.
//
//	go test -run '^$' -bench Search100k -benchtime 3000x ./phonebook/
func BenchmarkSearch100k(b *testing.B) {
	s := NewPostgres(openPostgres(b), italy)
	seedPostgres(b, s, 100000)
	for i := range 50 {
		if _, err := s.Create(context.Background(), Contact{Type: TypePrivate, OwnerID: "bob", Name: fmt.Sprintf("Rossi private %d", i), WorkPhone: fmt.Sprintf("0721 4%05d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	book := NewBook(s, Config{Normalizer: italy})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	if err := book.Refresh(context.Background()); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.Logf("refresh (load and index 100,000 public contacts): %v, %d MiB live heap", took, (after.HeapAlloc-before.HeapAlloc)>>20)
	// The viewer's own contacts by SQL on every search (as for a user
	// whose last search is older than OwnTTL).
	bookSQL := NewBook(s, Config{Normalizer: italy, OwnTTL: -1})
	if err := bookSQL.Refresh(context.Background()); err != nil {
		b.Fatal(err)
	}
	paths := []struct {
		name   string
		search func(term string) error
	}{
		{"book", func(term string) error {
			_, err := book.Search(context.Background(), Actor{User: "bob"}, term, 20, 0)
			return err
		}},
		{"book-ownsql", func(term string) error {
			_, err := bookSQL.Search(context.Background(), Actor{User: "bob"}, term, 20, 0)
			return err
		}},
		{"sql", func(term string) error {
			_, err := s.Search(context.Background(), Query{Viewer: "bob", Term: term, Limit: 20})
			return err
		}},
	}
	for _, set := range []struct {
		name  string
		terms []string
	}{
		// A name with a number, a number fragment, a company: tens of hits.
		{"selective", []string{"rossi 123", "0721 4", "3331", "globex 99", "ferrari 42", "o'brien"}},
		// A first name matches 6-11% of the table: count and sort them all.
		{"broad", []string{"giulia", "luca", "%"}},
	} {
		for _, p := range paths {
			b.Run(p.name+"/"+set.name, func(b *testing.B) { searchParallel(b, p.search, set.terms) })
		}
	}
}

func searchParallel(b *testing.B, search func(term string) error, terms []string) {
	var mu sync.Mutex
	var lat []time.Duration
	b.ReportAllocs()
	b.SetParallelism(25) // 25 x GOMAXPROCS(2) = 50 concurrent searches
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		i := rand.IntN(len(terms))
		for pb.Next() {
			i++
			start := time.Now()
			if err := search(terms[i%len(terms)]); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
	}
}
