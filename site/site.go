package site

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctibridge/ctibridge/ami"
	"github.com/ctibridge/ctibridge/calls"
	"github.com/ctibridge/ctibridge/link"
)

// Config is what a named PBX is built from: its name and its AMI
// client's, engine's and link's configurations.
type Config struct {
	Name   string
	AMI    ami.Config
	Engine calls.Config
	Link   link.Config
}

// Site is one named PBX at work: its client, engine and link, or, on
// the bus, its node (Bus; Client and Link nil).
type Site struct {
	Name   string
	Client *ami.Client
	Engine *calls.Engine
	Link   *link.Link
	Bus    *BusPBX
}

// Open builds a named PBX's own client, engine and link; its CDRs (the
// link's OnMessage) with their ids qualified (QualifyCDRs).
func Open(cfg Config) *Site {
	s := &Site{Name: cfg.Name, Client: ami.NewClient(cfg.AMI)}
	s.Engine = calls.New(cfg.Engine)
	if cfg.Link.OnMessage != nil {
		cfg.Link.OnMessage = QualifyCDRs(cfg.Name, s.Engine, cfg.Link.OnMessage)
	}
	s.Link = link.New(s.Client, s.Engine, cfg.Link)
	return s
}

// State is what clients read of the PBX: the engine, or on the bus the
// served engine, said stale while this node cannot hear the PBX's
// stream (bus.Node.State).
func (s *Site) State() calls.Source {
	if s.Bus != nil {
		return s.Bus.node.State()
	}
	return s.Engine
}

// Set is the named PBXs and the combined state of all. A nil Set has
// none: its methods do nothing.
type Set struct {
	list  []*Site
	multi *calls.Multi
	srcs  []calls.Source // the default PBX's first, then list's
}

// NewSet merges the default PBX's state def with each of list's into a
// calls.Multi keeping replay changes for resuming clients; nil when
// list is empty.
func NewSet(def calls.Source, list []*Site, replay int) *Set {
	if len(list) == 0 {
		return nil
	}
	ss := &Set{list: list, srcs: []calls.Source{def}}
	names := []string{""}
	for _, s := range list {
		ss.srcs = append(ss.srcs, s.State())
		names = append(names, s.Name)
	}
	ss.multi = calls.NewMulti(replay, names, ss.srcs)
	return ss
}

// Multi is the combined state of every PBX.
func (ss *Set) Multi() *calls.Multi { return ss.multi }

// All is the named PBXs (none when ss is nil).
func (ss *Set) All() []*Site {
	if ss == nil {
		return nil
	}
	return ss.list
}

// Len is how many named PBXs there are.
func (ss *Set) Len() int { return len(ss.All()) }

// Close closes the named PBXs' bus nodes.
func (ss *Set) Close() {
	for _, s := range ss.All() {
		if s.Bus != nil {
			s.Bus.Close()
		}
	}
}

// Ready: every named PBX's link is up and resynchronised (on the bus:
// its node follows and its state is live).
func (ss *Set) Ready() bool {
	for _, s := range ss.All() {
		if s.Bus != nil && !s.Bus.node.Ready() || s.Bus == nil && !s.Link.Ready() {
			return false
		}
	}
	return true
}

// Register registers each named PBX's figures, every series labelled
// pbx="<name>": its link's (ctibridge_ami_*, ctibridge_ready, the
// engine's), on the bus its node's (BusPBX.Collector).
func (ss *Set) Register(reg prometheus.Registerer) error {
	for _, s := range ss.All() {
		var c prometheus.Collector
		switch {
		case s.Bus != nil:
			c = s.Bus.Collector()
		case s.Link != nil:
			c = link.NewCollector(s.Link, s.Client)
		default:
			continue
		}
		if err := prometheus.WrapRegistererWith(prometheus.Labels{"pbx": s.Name}, reg).Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Run starts the named PBXs' links (on the bus their nodes: BusPBX.Run)
// and the merging of every PBX's state (each engine's followed by one
// goroutine) on wg with ctx, and their AMI clients (on the bus their CDR
// sessions) each with its own lifetime; the returned stop ends the
// clients, after ctx's goroutines are done.
func (ss *Set) Run(ctx context.Context, wg *sync.WaitGroup, errc chan<- error) (stop func()) {
	if ss == nil {
		return func() {}
	}
	var clients []*Lifetime
	var stops []func()
	for _, s := range ss.list {
		if s.Bus != nil {
			stops = append(stops, s.Bus.Run(ctx, wg, errc))
			continue
		}
		clients = append(clients, GoOwn(func(ctx context.Context) { s.Client.Run(ctx) }))
		wg.Go(func() {
			if err := s.Link.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("link %s: %w", s.Name, err)
			}
		})
	}
	for i, src := range ss.srcs {
		wg.Go(func() { ss.follow(ctx, i, src) })
	}
	return func() {
		for _, c := range clients {
			c.Stop()
		}
		for _, stop := range stops {
			stop()
		}
	}
}

// mergeEvery bounds how late a duration refresh reaches the combined
// state: a refresh appends nothing to the feed, so only this tick sees it.
const mergeEvery = 250 * time.Millisecond

// follow merges engine i's state into the combined one after each of its
// publishes, when its node's own say changes (a bus node that cannot
// hear its stream or whose leader's heartbeat is late: bus.State), and
// every mergeEvery.
func (ss *Set) follow(ctx context.Context, i int, src calls.Source) {
	t := time.NewTicker(mergeEvery)
	defer t.Stop()
	local, _ := src.(interface{ LocalChanged() <-chan struct{} })
	for {
		wake := src.Feed().Wait()
		var said <-chan struct{}
		if local != nil {
			said = local.LocalChanged()
		}
		ss.multi.Sync(i)
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-said:
		case <-t.C:
		}
	}
}
