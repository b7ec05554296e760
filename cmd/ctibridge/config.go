package main

import (
	"net/netip"

	"github.com/ctibridge/ctibridge/config"
	"github.com/ctibridge/ctibridge/rest"
)

// settings are one command's flags, environment variables and config
// file keys (config.Settings).
type settings = config.Settings

// prefixes adds a setting of comma-separated addresses or CIDR prefixes,
// checked when parsed (for --trusted-proxies).
func prefixes(s *settings, p *[]netip.Prefix, name, def, usage string) {
	*p, _ = rest.ParseTrustedProxies(def)
	s.Func(name, def, usage, func(v string) error {
		ps, err := rest.ParseTrustedProxies(v)
		if err != nil {
			return err
		}
		*p = ps
		return nil
	})
}
