package history

import (
	"context"
	"encoding/csv"
	"io"
	"strconv"
	"time"
)

// CSVHeader is the first line of ExportCSV's output.
var CSVHeader = []string{"calldate", "src", "cnam", "dst", "dst_cnam", "direction", "disposition", "duration",
	"billsec", "clid", "channel", "dstchannel", "lastapp", "dcontext", "uniqueid", "linkedid", "recordingfile"}

// ExportCSV writes the legs matching q as CSV to w, newest first, one row
// at a time straight from the database cursor, so memory stays constant
// whatever the size. Times are RFC 3339 in loc (UTC when nil). Fields
// that a spreadsheet would run as a formula (=, +, -, @ first) are
// prefixed with a quote.
func ExportCSV(ctx context.Context, s Store, q Query, w io.Writer, loc *time.Location, names func(string) string, extenMaxLen int) error {
	if loc == nil {
		loc = time.UTC
	}
	if extenMaxLen <= 0 {
		extenMaxLen = 5
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	name := func(n string) string {
		if names == nil || n == "" {
			return ""
		}
		return names(n)
	}
	dir := (&SQLStore{cfg: Config{ExtenMaxLen: extenMaxLen}}).direction
	rec := make([]string, len(CSVHeader))
	err := s.Export(ctx, q, func(c CDR) error {
		cnam := callerName(c.CLID)
		if cnam == "" || cnam == c.Src {
			cnam = name(c.Src)
		}
		rec[0] = c.CallDate.In(loc).Format(time.RFC3339)
		rec[1], rec[2], rec[3], rec[4] = c.Src, cnam, c.Dst, name(c.Dst)
		rec[5], rec[6] = dir(c.Src, c.Dst), c.Disposition
		rec[7], rec[8] = strconv.Itoa(c.Duration), strconv.Itoa(c.Billsec)
		rec[9], rec[10], rec[11], rec[12], rec[13] = c.CLID, c.Channel, c.DstChannel, c.LastApp, c.DContext
		rec[14], rec[15], rec[16] = c.UniqueID, c.LinkedID, c.RecordingFile
		for i, v := range rec {
			if v != "" && (v[0] == '=' || v[0] == '+' || v[0] == '-' || v[0] == '@') && i != 0 {
				rec[i] = "'" + v
			}
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
		if cw.Error() != nil {
			return cw.Error()
		}
		return nil
	})
	if err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}
