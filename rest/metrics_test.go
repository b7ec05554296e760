package rest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// counterValue reads one series of a counter vector from m.
func counterValue(t testing.TB, m *Metrics, name string, label string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetValue() == label {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
