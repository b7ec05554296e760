// Small DOM and formatting helpers. Everything that comes from the server
// goes into the page as text (textContent), never as HTML.

// el builds an element: el('button', {class: 'x', onclick: f}, 'text', child).
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (v === true) e.setAttribute(k, '');
      else e.setAttribute(k, String(v));
    }
  }
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

export const $ = (sel, root = document) => root.querySelector(sel);

// clock estimates the server's clock: now() is the server's current time
// in ms, corrected by the offset seen on the events' "at" (an event cannot
// arrive before it left, so the largest at - local is the best bound).
export const clock = {
  offset: null,
  observe(at) {
    if (typeof at !== 'number' || !at) return;
    const d = at - Date.now();
    if (this.offset === null || d > this.offset || Math.abs(d - this.offset) > 5000) this.offset = d;
  },
  now() { return Date.now() + (this.offset ?? 0); },
};

// fmtDuration formats seconds as m:ss or h:mm:ss.
export function fmtDuration(sec) {
  sec = Math.max(0, Math.floor(sec));
  const h = Math.floor(sec / 3600), m = Math.floor((sec % 3600) / 60), s = sec % 60;
  const ss = String(s).padStart(2, '0');
  return h ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

// fmtTime formats epoch ms (or s when small) as a local date and time.
export function fmtTime(t) {
  if (t < 1e11) t *= 1000;
  const d = new Date(t);
  return d.toLocaleString(undefined, {year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit'});
}

// ymd formats a Date as YYYYMMDD; isoDay as YYYY-MM-DD (for <input type=date>).
export function isoDay(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
}
export const ymd = (iso) => iso.replaceAll('-', '');

// toast shows a short message in the live region.
let toastTimer = 0;
// ask shows the confirmation dialog (a modal <dialog>: Escape or Cancel
// says no) and resolves whether the user pressed ok, the action's own
// words.
export function ask(question, ok) {
  const d = $('#confirm-dialog');
  $('#confirm-text', d).textContent = question;
  $('#confirm-ok', d).textContent = ok;
  d.returnValue = '';
  d.showModal();
  $('#confirm-cancel', d).focus(); // the safe choice under Enter
  return new Promise((done) => d.addEventListener('close', () => done(d.returnValue === 'ok'), {once: true}));
}

export function toast(msg, kind = 'info') {
  const t = $('#toast');
  t.textContent = msg;
  t.className = 'toast ' + kind;
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, kind === 'error' ? 8000 : 4000);
}

// numberButton is a number shown as a button that calls it (click-to-call
// from every number on screen); plain text when it may not be called.
export function numberButton(text, number, onCall, label) {
  if (!number || !onCall) return text;
  return el('button', {type: 'button', class: 'link call-number', 'aria-label': label, onclick: () => onCall(number)}, text);
}

// applyDelta applies a delta event (trunkConversations, queueMembers:
// docs/websocket.md) to entities, in place: the entity under d[key]
// (made, with items empty, when new) gets the fields of d but "set" and
// "removed", the items of "set" put under their keys in its items field,
// those of "removed" deleted.
export function applyDelta(entities, d, key, items) {
  const {set, removed, ...fields} = d;
  const x = entities[d[key]] || (entities[d[key]] = {[items]: {}});
  Object.assign(x, fields);
  const m = x[items] || (x[items] = {});
  for (const [k, v] of Object.entries(set || {})) m[k] = v;
  for (const k of removed || []) delete m[k];
}
