// Package sdnotify tells systemd how a Type=notify service is doing, the
// way sd_notify(3) does: one datagram of newline-separated KEY=VALUE
// assignments to the unix socket systemd names in $NOTIFY_SOCKET.
//
// ctibridge sends READY=1 once its first resynchronisation with the PBX is
// done (so `systemctl start` returns when the state is true, and units
// ordered after it start then), RELOADING=1 then READY=1 around a SIGHUP
// reload, STOPPING=1 when it begins to shut down, and STATUS=... lines that
// `systemctl status` shows.
//
// What it deliberately does not do: read the environment (the caller passes
// the socket name, so only cmd/ctibridge reads $NOTIFY_SOCKET), unset it,
// pass file descriptors, or speak the watchdog protocol. It uses the
// standard library only and no cgo. Outside systemd (no socket name) every
// call is a no-op that returns nil.
//
// Concurrency: a Notifier is safe for concurrent use; each call sends one
// datagram.
package sdnotify
