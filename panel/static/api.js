// REST client: the bearer token lives in sessionStorage (per tab, gone
// with the tab; never a cookie), every call sends it in Authorization.
// The session's refresh token and the access token's expiry live beside
// it, for renewal (renew.js).

import {plainError} from './errors.js';

const KEY = 'ctibridge.token', REFRESH = 'ctibridge.refresh', EXPIRES = 'ctibridge.expires';

// ApiError is a failed request; its message is already in plain words
// (errors.js), the server's own text is kept in serverMessage for logs.
export class ApiError extends Error {
  constructor(status, code, serverMessage) {
    super('');
    this.status = status;
    this.code = code;
    this.serverMessage = serverMessage || '';
    this.message = plainError(this);
  }
}

export const api = {
  token: sessionStorage.getItem(KEY) || '',
  refreshToken: sessionStorage.getItem(REFRESH) || '',
  expiresAt: Number(sessionStorage.getItem(EXPIRES)) || 0,
  onUnauthorized: () => {},

  // setSession keeps a login's or a refresh's answer ({token, expiresAt,
  // refreshToken}); null forgets the session.
  setSession(r) {
    this.token = r?.token || '';
    this.refreshToken = r?.refreshToken || '';
    this.expiresAt = r?.expiresAt || 0;
    for (const [k, v] of [[KEY, this.token], [REFRESH, this.refreshToken], [EXPIRES, this.expiresAt]]) {
      if (v) sessionStorage.setItem(k, String(v));
      else sessionStorage.removeItem(k);
    }
  },

  async request(method, path, body, {raw = false} = {}) {
    const headers = {};
    if (this.token) headers.Authorization = 'Bearer ' + this.token;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-cache'});
    } catch (e) {
      throw new ApiError(0, 'network', 'the server cannot be reached');
    }
    if (!res.ok) {
      let code = '', message = '';
      try {
        const j = await res.json();
        code = j.error?.code || '';
        message = j.error?.message || '';
      } catch { /* not JSON */ }
      if (res.status === 401 && path !== '/auth/login') this.onUnauthorized();
      throw new ApiError(res.status, code, message);
    }
    if (raw) return res;
    const text = await res.text();
    return text ? JSON.parse(text) : {};
  },

  get(path, opts) { return this.request('GET', path, undefined, opts); },
  post(path, body) { return this.request('POST', path, body ?? {}); },
};

// enc encodes one path segment.
export const enc = encodeURIComponent;
