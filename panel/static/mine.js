// The user's own settings in the top bar: presence (when the server has
// user/presencelist), DND and call forwarding on the user's first
// extension, each shown only when /user/me allows it, and read back from
// the extension's live state (presence, dnd, cf).

import {$, el, toast} from './util.js';
import {api} from './api.js';
import {t} from './i18n.js';
import {state, can, myEndpoints} from './state.js';

export class MyControls {
  constructor() {
    this.dnd = $('#me-dnd');
    this.cfWrap = $('#me-cf-wrap');
    this.cf = $('#me-cf');
    this.cfBtn = $('#me-cf-btn');
    this.dnd.addEventListener('click', () => this.toggleDND());
    this.cfBtn.addEventListener('click', () => this.toggleCF());
    this.cf.addEventListener('keydown', (e) => { if (e.key === 'Enter') this.toggleCF(); });
    this.presWrap = $('#me-pres-wrap');
    this.pres = $('#me-pres');
    this.presList = [];
    this.pres.addEventListener('change', () => this.setPresence(this.pres.value));
    // An update that came while the chooser had the focus shows on leaving it.
    this.pres.addEventListener('blur', () => this.render());
  }

  // loadPresence reads the choices the user has (GET user/presencelist);
  // called only when the server has them.
  async loadPresence() {
    try {
      this.presList = await api.get('/user/presencelist') || [];
    } catch {
      this.presList = [];
    }
    this.render();
  }

  // setPresence stores a choice (POST user/presence); a forward takes
  // the number typed in the forward box.
  async setPresence(status) {
    const body = {status};
    if (status === 'callforward') {
      const to = this.cf.value.trim();
      if (!to) { this.render(); this.cf.focus(); toast(t('me.cf.number'), 'error'); return; }
      body.to = to;
    }
    const what = t('me.pres.set', {status: t('pres.' + status)});
    try {
      await api.post('/user/presence', body);
      toast(t('msg.done', {what}));
    } catch (e) {
      toast(t('msg.failed', {what, why: e.message}), 'error');
      // Back to what the PBX has (render leaves a focused chooser alone).
      const x = state.exts[this.exten()];
      if (x) this.pres.value = this.presence(x);
    }
  }

  // presence is the user's chosen presence as the live state has it.
  presence(x) {
    const p = state.presence?.[x.exten];
    if (p && this.presList.includes(p)) return p;
    return x.dnd ? 'dnd' : x.cf ? 'callforward' : 'online';
  }

  exten() { return myEndpoints()[0]; }

  async post(path, body, what) {
    try {
      await api.post('/astproxy/' + path, body);
      toast(t('msg.done', {what}));
    } catch (e) {
      toast(t('msg.failed', {what, why: e.message}), 'error');
    }
  }

  toggleDND() {
    const x = state.exts[this.exten()];
    this.post('dnd', {endpointId: this.exten(), activate: !x?.dnd}, t('me.dnd'));
  }

  toggleCF() {
    const x = state.exts[this.exten()];
    if (x?.cf) { this.post('cfcall', {endpointId: this.exten(), type: 'unconditional'}, t('me.cf.off')); return; }
    const to = this.cf.value.trim();
    if (!to) { this.cf.focus(); toast(t('me.cf.number'), 'error'); return; }
    this.post('cfcall', {endpointId: this.exten(), type: 'unconditional', to}, t('me.cf.set'));
  }

  // render follows the user's extension: pressed DND, the forward target.
  render() {
    const e = this.exten();
    const x = e ? state.exts[e] : null;
    this.dnd.hidden = !e || !can('dnd');
    this.cfWrap.hidden = !e || !can('call_forward');
    this.presWrap.hidden = !e || !this.presList.length;
    if (!x) return;
    if (this.presList.length && document.activeElement !== this.pres) {
      if (this.pres.options.length !== this.presList.length || this.pres.dataset.lang !== t('pres.online')) {
        this.pres.dataset.lang = t('pres.online');
        this.pres.replaceChildren(...this.presList.map((p) => el('option', {value: p}, t('pres.' + p))));
      }
      this.pres.value = this.presence(x);
    }
    this.dnd.setAttribute('aria-pressed', String(!!x.dnd));
    this.dnd.classList.toggle('on', !!x.dnd);
    const cf = x.cf || '';
    if (cf) this.cf.value = cf;
    // A forward just removed (here or by a presence choice) leaves the box empty.
    else if (this.cf.disabled) this.cf.value = '';
    this.cf.disabled = !!cf;
    this.cfBtn.textContent = cf ? t('me.cf.off') : t('me.cf.set');
    this.cfBtn.setAttribute('aria-pressed', String(!!cf));
  }
}
