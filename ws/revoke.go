package ws

// Revoker, when the hub's Authenticator also implements it (*auth.Service
// does), tells the hub when a token's session ends before its expiry
// (logout, an admin's revocation, its user removed or changed): the hub
// then closes that client at once with CloseTokenExpired (4003), as on
// expiry. OnRevoke calls f once, from any goroutine; stop ends the watch.
type Revoker interface {
	OnRevoke(token string, f func()) (stop func())
}

// watchRevoke closes c when token's session is revoked, replacing the
// watch of a previous token (renewal).
func (c *conn) watchRevoke(token string) {
	r, ok := c.h.auth.(Revoker)
	if !ok {
		return
	}
	stop := r.OnRevoke(token, func() {
		c.closeWith(CloseTokenExpired, "session revoked", "revoked", false)
	})
	c.mu.Lock()
	old := c.unwatch
	c.unwatch = stop
	c.mu.Unlock()
	if old != nil {
		old()
	}
}

// unwatchRevoke ends the watch when the connection ends.
func (c *conn) unwatchRevoke() {
	c.mu.Lock()
	stop := c.unwatch
	c.unwatch = nil
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
}
