package sqldb

import "time"

// SetOutageClock makes o read the time from now.
func SetOutageClock(o *Outage, now func() time.Time) { o.now = now }
