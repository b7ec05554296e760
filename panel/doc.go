// Package panel is the operator web panel: static HTML, CSS and JavaScript
// modules embedded in the binary and served by Handler. The panel is a
// client of the public APIs only (REST for reads at start-up and for
// actions, the WebSocket at /ws for live state); it holds no server-side
// logic and never sees the PBX.
//
// What it does not do: no build step, no server-side rendering, no
// cookies (the browser keeps the bearer token in sessionStorage), and no
// resource from another origin (the Content-Security-Policy forbids it).
//
// Serving: "/" answers index.html; the assets live under
// /panel/<hash>/ where <hash> is a digest of every embedded file, computed
// once at start-up, so they are cached for a year (immutable) and a new
// binary changes every asset URL. index.html itself is never cached.
// docs/panel.md describes the panel, its mounting and its tests.
//
// Concurrency: Handler's result is immutable after creation and safe for
// concurrent use.
package panel
