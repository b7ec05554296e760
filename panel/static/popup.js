// Incoming call pop-up (extenRinging): who is calling, the phonebook
// match, the customer card when the deployment has one, and a link to
// the recent calls with that number, with the ring
// alerts of ring.js. It goes away when the call is answered or ends, or
// when dismissed.

import {el, $} from './util.js';
import {api, enc} from './api.js';
import {state} from './state.js';
import {t} from './i18n.js';
import {startRing, stopRing} from './ring.js';

export class Popup {
  // onHistory(number)
  constructor(root, onHistory) {
    this.root = root;
    this.onHistory = onHistory;
    this.cur = null; // the extenRinging data shown
    $('#popup-close', root).addEventListener('click', () => this.hide());
    document.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && !this.root.hidden && !document.querySelector('dialog[open]')) this.hide();
    });
  }

  show(d) {
    // An extenRinging can come after the update that says the call was
    // answered (the PBX's ring and answer in one batch of events): the
    // pop-up is for a phone that rings now, never for a call in progress.
    if (!rings(d.exten)) return;
    // The same ring told twice (a snapshot, then its extenRinging) keeps
    // the alerts going as they are.
    const again = this.cur && this.cur.exten === d.exten && this.cur.convid === d.convid;
    this.cur = d;
    this.told = d.convid;
    const num = d.callerNum || '';
    $('#popup-title', this.root).textContent = t('pop.title', {exten: d.exten});
    $('#popup-caller', this.root).textContent = d.callerName && d.callerName !== num ? `${d.callerName} (${num})` : (num || d.callerName || t('pop.unknown'));
    $('#popup-queue', this.root).textContent = d.queue ? t('pop.queue', {queue: d.queue}) : '';
    const match = $('#popup-match', this.root);
    match.textContent = '';
    const contact = d.contact || d.phonebook || null;
    if (contact) this.showMatch(contact);
    else if (num && state.phonebook !== false) this.lookup(num, d);
    const card = $('#popup-card', this.root);
    const href = cardLink(state.me?.popupLink, num, d.callerName && d.callerName !== num ? d.callerName : '');
    card.hidden = !href;
    if (href) card.href = href; else card.removeAttribute('href');
    const hist = $('#popup-history', this.root);
    hist.hidden = !num;
    hist.onclick = () => { this.onHistory(num); this.hide(); };
    // Shown without taking the focus: the operator may be typing. The
    // live region announces it; Escape dismisses it from anywhere.
    this.root.hidden = false;
    if (!again) startRing($('#popup-caller', this.root).textContent, $('#popup-title', this.root).textContent);
  }

  async lookup(num, d) {
    try {
      const r = await api.get(`/phonebook/lookup/${enc(num)}`);
      const c = r.rows ? r.rows[0] : (r.contact || (r.id ? r : null));
      if (c && this.cur === d) this.showMatch(c);
    } catch { /* no match or no phonebook: the pop-up shows the caller ID */ }
  }

  showMatch(c) {
    const m = $('#popup-match', this.root);
    m.replaceChildren(el('span', {class: 'muted'}, t('pop.pb')), [c.name, c.company].filter(Boolean).join(' · ') || t('pop.contact'));
  }

  // fromSnapshot shows a ring the snapshot has and no extenRinging told:
  // a call that rang before the page's socket subscribed, or while it
  // was resynchronising. The pop-up already up, or the ring it showed
  // (even dismissed), is not told again.
  fromSnapshot(mine) {
    if (this.cur) return;
    for (const e of mine) {
      if (!rings(e)) continue;
      const c = Object.values(state.exts[e].conversations || {}).find((c) => !c.connected && c.direction === 'in');
      // Not the first leg of the user's own click-to-call.
      if (!c || c.id === this.told || mine.includes(c.counterpartNum)) continue;
      this.show({exten: e, callerNum: c.counterpartNum || '', callerName: c.counterpartName || '', queue: c.queueId || '', convid: c.id});
      return;
    }
  }

  // update hides the pop-up when the rung extension no longer rings that call.
  update() {
    if (!this.cur) return;
    // Conversation ids can change while a call is set up: look at the
    // extension's status instead.
    if (!rings(this.cur.exten)) this.hide();
  }

  hide() {
    if (this.cur) stopRing();
    this.root.hidden = true;
    this.cur = null;
  }
}

// cardLink fills the deployment's customer-card URL template (GET
// /user/me popupLink, NethCTI's paramurl) with the caller's number and
// name, each URL-escaped; only an http or https result is a link.
export function cardLink(tmpl, number, name) {
  if (!tmpl || !number) return '';
  const s = tmpl.replaceAll('{number}', encodeURIComponent(number)).replaceAll('{name}', encodeURIComponent(name));
  try {
    const u = new URL(s);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : '';
  } catch {
    return '';
  }
}

// rings reports whether the extension's last known status is ringing.
function rings(exten) {
  const x = state.exts[exten];
  return !!x && (x.status === 'ringing' || x.status === 'busy_ringing');
}
