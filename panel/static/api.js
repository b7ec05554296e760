// REST client: the bearer token lives in sessionStorage (per tab, gone
// with the tab; never a cookie), every call sends it in Authorization.

import {plainError} from './errors.js';

const KEY = 'ctibridge.token';

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
  onUnauthorized: () => {},

  setToken(t) {
    this.token = t || '';
    if (t) sessionStorage.setItem(KEY, t);
    else sessionStorage.removeItem(KEY);
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
