// Renewal: a desk stays logged in for a whole shift. Once three quarters
// of the access token's life are gone, the session's refresh token buys a
// new session (POST /auth/refresh); the open WebSocket takes the new token
// in place ({"op":"auth"}), so nothing is reconnected or missed. A refresh
// the server refuses (401: the session was revoked, the refresh token
// expired) ends the session at once, with the reason; one that cannot
// reach the server is tried again every few seconds while the token lasts.

import {api, ApiError} from './api.js';

const RETRY = 5000;

export class Renewal {
  // handlers: renewed() after a new token is kept, ended(code) when the
  // server refused the refresh.
  constructor(handlers) {
    this.h = handlers;
    this.timer = 0;
  }

  // start plans the next renewal from the token's expiry.
  start() {
    this.stop();
    if (!api.refreshToken || !api.expiresAt) return; // a session from before renewal: it ends at expiry
    const left = api.expiresAt - Date.now();
    this.plan(Math.max(1000, left / 4 < 1000 ? left - 1000 : left * 3 / 4));
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = 0;
  }

  plan(ms) {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.renew(), ms);
  }

  async renew() {
    const spent = api.refreshToken;
    try {
      const r = await api.post('/auth/refresh', {refreshToken: spent});
      if (api.refreshToken !== spent) return; // logged out or in again meanwhile
      api.setSession(r);
      this.h.renewed();
      this.start();
    } catch (e) {
      if (api.refreshToken !== spent) return;
      if (e instanceof ApiError && (e.status === 401 || e.status === 400)) {
        this.h.ended(e.code || 'session_ended');
        return;
      }
      // The server is unreachable or busy: again while the token lasts;
      // at its expiry the socket closes with 4003 and the login says so.
      if (api.expiresAt - Date.now() > RETRY) this.plan(RETRY);
    }
  }
}
