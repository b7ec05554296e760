// Conferences (ConfBridge rooms): members with talking, muted and owner,
// the lock, and the actions the user may take (mute, remove, lock, end),
// from GET astproxy/conferences and conferenceUpdate events.

import {el, clock, fmtDuration, toast, ask} from './util.js';
import {api} from './api.js';
import {t} from './i18n.js';
import {state, can, inScope, nameOf} from './state.js';

const byNum = (a, b) => a.localeCompare(b, undefined, {numeric: true});

async function post(path, body, what) {
  try {
    await api.post('/astproxy/' + path, body);
    toast(t('msg.done', {what}));
  } catch (e) {
    toast(t('msg.failed', {what, why: e.message}), 'error');
  }
}

export class ConfsView {
  constructor(root) {
    this.root = root;
    this.durs = []; // [span, joinTime]
  }

  // load reads the rooms once (the snapshot does not carry them); false
  // when the server has no conferences.
  async load() {
    try {
      state.confs = await api.get('/astproxy/conferences') || {};
      return true;
    } catch {
      state.confs = {};
      return false;
    }
  }

  // apply is a conferenceUpdate: a room with no members has ended.
  apply(d) {
    if (!d.users || !Object.keys(d.users).length) delete state.confs[d.id];
    else state.confs[d.id] = d;
  }

  render() {
    const ids = Object.keys(state.confs).sort(byNum);
    this.durs = [];
    if (!ids.length) {
      this.root.replaceChildren(el('p', {class: 'muted'}, t('cf.none')));
      return;
    }
    this.root.replaceChildren(...ids.map((id) => this.room(state.confs[id])));
    this.tick();
  }

  room(c) {
    const users = Object.values(c.users || {}).sort((a, b) => (a.joinTime || 0) - (b.joinTime || 0));
    // Managing a room needs the permission on the room's name (admins;
    // an operator for a room named after an extension of his groups).
    const may = can('conference') && inScope(c.id);
    const member = (u) => {
      const d = el('span', {class: 'dur'});
      if (u.joinTime) this.durs.push([d, u.joinTime]);
      const flags = [u.owner && t('cf.owner'), u.talking && t('cf.talking'), u.muted && t('cf.muted')].filter(Boolean);
      const label = u.name || (u.extenId ? nameOf(u.extenId) : '') || t('peer.private');
      return el('li', {class: 'member' + (u.talking ? ' talking' : '') + (u.muted ? ' muted' : ''), 'data-user': u.id},
        el('span', {class: 'name'}, label), el('span', {class: 'num'}, u.extenId || ''),
        el('span', {class: 'flags'}, flags.join(', ')), d,
        may && el('button', {type: 'button', 'data-role': u.muted ? 'unmute' : 'mute',
          onclick: () => post(u.muted ? 'unmute_userconf' : 'mute_userconf', {confId: c.id, userId: u.id}, u.muted ? t('cf.unmute') : t('cf.mute'))},
        u.muted ? t('cf.unmute') : t('cf.mute')),
        may && el('button', {type: 'button', class: 'danger', 'data-role': 'kick',
          onclick: async () => {
            if (await ask(t('cf.kickSure', {who: label, id: c.id}), t('cf.kick'))) post('hangup_userconf', {confId: c.id, userId: u.id}, t('cf.kick'));
          }}, t('cf.kick')));
    };
    return el('section', {class: 'queue conf', 'data-conf': c.id, 'aria-label': t('cf.title', {id: c.id})},
      el('h3', null, t('cf.title', {id: c.id}), el('span', {class: 'muted'}, ` · ${c.locked ? t('cf.locked') : t('cf.open')} · ${t('cf.members', {n: users.length})}`)),
      el('ul', {class: 'member-list'}, ...users.map(member)),
      may && el('p', {class: 'conf-actions'},
        el('button', {type: 'button', 'data-role': 'lock', 'aria-pressed': String(!!c.locked),
          onclick: () => post('lock_conf', {confId: c.id, lock: !c.locked}, c.locked ? t('cf.unlock') : t('cf.lock'))}, c.locked ? t('cf.unlock') : t('cf.lock')),
        el('button', {type: 'button', class: 'danger', 'data-role': 'end',
          onclick: async () => {
            if (await ask(t('cf.endSure', {id: c.id, n: users.length}), t('cf.end'))) post('end_conf', {endpointId: c.id}, t('cf.end'));
          }}, t('cf.end'))));
  }

  tick() {
    const now = clock.now();
    for (const [span, at] of this.durs) span.textContent = fmtDuration((now - at) / 1000);
  }
}
