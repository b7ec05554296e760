// ctibridge operator panel: wiring of login, live state, views and actions.

import {el, $, toast} from './util.js';
import {api, ApiError} from './api.js';
import {t, lang, LANGS, setLang, translatePage} from './i18n.js';
import {prefs} from './prefs.js';
import {Live} from './live.js';
import {Renewal} from './renew.js';
import {askNotify} from './ring.js';
import {state, can, myEndpoints, nameOf} from './state.js';
import {Grid} from './grid.js';
import {CallsBar} from './calls.js';
import {CardMenu} from './cardmenu.js';
import {MyControls} from './mine.js';
import {QueuesView, applyQueueDelta} from './queues.js';
import {TrunksView, applyTrunkDelta} from './trunks.js';
import {ConfsView} from './confs.js';
import {Phonebook} from './phonebook.js';
import {History} from './history.js';
import {Popup} from './popup.js';
import {banner} from './banner.js';
import {GroupTabs} from './gtabs.js';
import {refuseTarget, pickupUpdate} from './safety.js';
import {Wallboard} from './wallboard.js';

const views = ['ext', 'queues', 'wall', 'trunks', 'confs', 'phonebook', 'history'];
// A directory this large opens in compact mode unless the user chose.
const COMPACT_FROM = 60;

const grid = new Grid($('#grid'), {
  nameOf: (exten, x) => nameOf(exten, x),
  onCall: (exten) => call(exten),
  onDropTransfer: (exten, d) => transfer(d, exten),
  onKeyTransfer: (exten) => {
    const a = activeCall();
    if (a) transfer(a, exten);
    else toast(t('msg.noCall'), 'error');
  },
  onMenu: (exten, anchor) => menu.open(exten, anchor),
  onCount: (n, total) => { $('#ext-count').textContent = n === total ? t('grid.count', {n: total}) : t('grid.countOf', {n, total}); },
});
const bar = new CallsBar($('#mycalls'));
const gtabs = new GroupTabs($('#ext-gtabs'), (g) => pickGroup(g));
const menu = new CardMenu({active: () => activeCall(), transfer: (d, to) => transfer(d, to), call: (n) => call(n)});
const mine = new MyControls();
const queues = new QueuesView($('#queues'), $('#parkings'), (n) => call(n));
const trunks = new TrunksView($('#trunks'), (n) => call(n));
const confs = new ConfsView($('#confs'));
const wall = new Wallboard($('#wallboard'));
wall.name = 'wall';
queues.name = 'queues';
trunks.name = 'trunks';
confs.name = 'confs';
const phonebook = new Phonebook($('#view-phonebook'), (n) => call(n));
const history = new History($('#view-history'), (n) => call(n));
const popup = new Popup($('#popup'), (n) => { showView('history'); history.showNumber(n); });

function activeCall() {
  const a = bar.active();
  return a ? {convid: a.conv.id, endpointId: a.endpoint} : null;
}

// dirty re-renders a view at most once per frame, and only while it is
// shown (showView renders it when it is opened).
const pending = new Set();
const shown = {wall: () => !$('#view-wall').hidden, queues: () => !$('#view-queues').hidden, trunks: () => !$('#view-trunks').hidden, confs: () => !$('#view-confs').hidden};
function dirty(view) {
  if (!shown[view.name]()) return;
  if (!pending.size) {
    requestAnimationFrame(() => {
      const views = [...pending];
      pending.clear();
      for (const v of views) v.render();
    });
  }
  pending.add(view);
}

function snapshot(m) {
  state.exts = m.extensions || {};
  if (m.queues) state.queues = m.queues;
  if (m.parkings) state.parkings = m.parkings;
  if (m.trunks) state.trunks = m.trunks;
  if (m.presence) state.presence = m.presence;
  if (m.pbx) state.pbx = m.pbx;
  state.stale = !!m.stale;
  if (prefs.compact === null) {
    document.documentElement.classList.toggle('compact', Object.keys(state.exts).length >= COMPACT_FROM);
    $('#pref-compact').checked = Object.keys(state.exts).length >= COMPACT_FROM;
  }
  grid.setAll(state.exts);
  // A fresh snapshot (first, or after a resume that could not replay):
  // the rooms are not in it, read them again.
  if (!$('#tab-confs').hidden) confs.load().then(() => dirty(confs));
  refreshGroups();
  bar.render();
  mine.render();
  queues.render();
  if (shown.wall()) wall.render();
  trunks.render();
  popup.update();
  popup.fromSnapshot(myEndpoints());
  banner();
  markPainted('ctib:grid');
}

function onExtension(d) {
  const before = state.exts[d.exten];
  state.exts[d.exten] = d;
  grid.set(d);
  // Another card may name this extension: its redaction follows this one.
  if (hidden(before) !== hidden(d)) grid.refresh();
  if (myEndpoints().includes(d.exten)) { bar.render(); mine.render(); }
  popup.update();
  pickupUpdate(d.exten);
  dirty(queues);
  dirty(wall);
}

const hidden = (x) => Object.values(x?.conversations || {}).some((c) => !c.counterpartNum && !c.counterpartName);

function event(m) {
  const d = m.data;
  switch (m.type) {
    case 'extenUpdate': onExtension(d); break;
    case 'extenRinging':
      // Not for the first leg of our own click-to-call: the PBX rings
      // our phone with our own number as the caller.
      if (myEndpoints().includes(d.exten) && !myEndpoints().includes(d.callerNum)) popup.show(d);
      break;
    case 'queueUpdate':
      state.queues[d.queue] = d;
      dirty(queues);
      dirty(wall);
      refreshGroups();
      break;
    case 'queueMembers':
      applyQueueDelta(state.queues, d);
      dirty(queues);
      dirty(wall);
      refreshGroups();
      break;
    case 'queueMemberUpdate': {
      const q = state.queues[d.queue];
      if (!q) break;
      q.members = q.members || {};
      q.members[d.member] = {...q.members[d.member], ...d};
      dirty(queues);
      dirty(wall);
      break;
    }
    case 'parkingUpdate': state.parkings[d.parking] = d; dirty(queues); grid.refresh(); break;
    case 'trunkUpdate': state.trunks[d.name] = d; dirty(trunks); break;
    case 'trunkConversations': applyTrunkDelta(state.trunks, d); dirty(trunks); break;
    case 'conferenceUpdate': confs.apply(d); dirty(confs); break;
    case 'userPresenceUpdate':
      state.presence = {...state.presence, [d.exten]: d.status};
      if (state.exts[d.exten]) grid.set(state.exts[d.exten]);
      if (myEndpoints().includes(d.exten)) mine.render();
      break;
    case 'pbxStatus':
      state.pbx = d;
      state.stale = d.pbx !== 'live';
      banner();
      break;
  }
}

const live = new Live({
  snapshot,
  event,
  status(s, attempt) {
    state.link = s;
    state.attempt = attempt || 0;
    banner();
  },
  authFailed(code, reason) { logout(endedWhy(code, reason)); },
});

// The session lasts the shift: renewed before it expires, the socket
// handed the new token in place.
const renewal = new Renewal({
  renewed() { live.renew(); },
  ended() { logout('login.revoked'); },
});

// endedWhy names, for the login form, why the server closed the socket:
// the session was ended (logout elsewhere, an admin, a changed user) or
// its time was up.
function endedWhy(code, reason) {
  if (code === 4002 || /revoked/.test(reason)) return 'login.revoked';
  return 'login.expired';
}

// markPainted records when a render reached the screen (two frames
// later), for the first-paint measurement in docs/panel.md.
function markPainted(name) {
  requestAnimationFrame(() => requestAnimationFrame(() => {
    if (!performance.getEntriesByName(name).length) performance.mark(name);
  }));
}

function refreshGroups(force) {
  const sel = $('#ext-group');
  const cur = sel.value;
  const groups = {mine: new Set(myEndpoints())};
  const opts = [el('option', {value: 'all'}, t('group.all'))];
  if (myEndpoints().length) opts.push(el('option', {value: 'mine'}, t('group.mine')));
  const qs = Object.values(state.queues);
  if (qs.length) {
    opts.push(el('optgroup', {label: t('group.queues')}, ...qs.map((q) => {
      groups['queue:' + q.queue] = new Set(Object.keys(q.members || {}));
      return el('option', {value: 'queue:' + q.queue}, q.name || q.queue);
    })));
  }
  opts.push(el('optgroup', {label: t('group.status')},
    el('option', {value: 'available'}, t('group.available')),
    el('option', {value: 'busy'}, t('group.busy')),
    el('option', {value: 'offline'}, t('group.offline'))));
  const key = JSON.stringify(Object.entries(groups).map(([k, v]) => [k, [...v]]));
  if (force || key !== refreshGroups.key) {
    refreshGroups.key = key;
    sel.replaceChildren(...opts);
    sel.value = [...sel.options].some((o) => o.value === cur) ? cur : 'all';
    grid.setGroups(groups);
    // The same groups (not the statuses) as tabs.
    const tabs = [['all', t('group.all')]];
    if (myEndpoints().length) tabs.push(['mine', t('group.mine')]);
    for (const q of qs) tabs.push(['queue:' + q.queue, q.name || q.queue]);
    gtabs.render(tabs, sel.value);
  }
}

// pickGroup shows one group (a tab or the Show selector).
function pickGroup(g) {
  $('#ext-group').value = g;
  gtabs.select(g);
  grid.setFilter({group: g});
}

async function call(number) {
  if (!can('call')) { toast(t('err.mayNotCall'), 'error'); return; }
  const from = $('#dial-from').value || myEndpoints()[0];
  // Whoever has no phone (the admin, typically) cannot place a call.
  if (!from) { toast(t('err.noPhone'), 'error'); return; }
  try {
    await api.post('/astproxy/call', {number, endpointId: from});
    toast(myEndpoints().length > 1 ? t('msg.callingFrom', {number, from}) : t('msg.calling', {number}));
  } catch (e) {
    toast(t('msg.failed', {what: t('act.callBack', {number}), why: e.message}), 'error');
  }
}

async function transfer({convid, endpointId}, to) {
  const why = refuseTarget(to);
  if (why) { toast(why, 'error'); return; }
  try {
    await api.post('/astproxy/blindtransfer', {convid, endpointId, to});
    toast(t('msg.transferring', {to}));
  } catch (e) {
    toast(t('msg.failed', {what: t('msg.transferring', {to}), why: e.message}), 'error');
  }
}

function showView(name) {
  for (const v of views) {
    const tab = $('#tab-' + v), panel = $('#view-' + v);
    const on = v === name;
    tab.setAttribute('aria-selected', String(on));
    tab.tabIndex = on ? 0 : -1;
    panel.hidden = !on;
  }
  if (name === 'history' && !history.loaded) { history.loaded = true; history.scopeFor(); history.load(true); }
  if (name === 'queues') queues.render();
  if (name === 'wall') wall.render();
  if (name === 'trunks') trunks.render();
  if (name === 'confs') confs.load().then(() => confs.render());
}

function setupTabs() {
  const tabs = views.map((v) => $('#tab-' + v));
  tabs.forEach((tab, i) => {
    tab.addEventListener('click', () => showView(views[i]));
    tab.addEventListener('keydown', (e) => {
      let j = -1;
      const shown = (k) => !tabs[k].hidden;
      if (e.key === 'ArrowRight') { j = i; do j = (j + 1) % tabs.length; while (!shown(j)); }
      if (e.key === 'ArrowLeft') { j = i; do j = (j + tabs.length - 1) % tabs.length; while (!shown(j)); }
      if (j >= 0) { e.preventDefault(); showView(views[j]); tabs[j].focus(); }
    });
  });
}

// probe reads the server's API description (GET /openapi.yaml) for the
// optional parts (conferences, presence): a server without them shows no
// tab and is asked for no such topic, and no request ever answers 404.
async function probe() {
  let spec = '';
  try { spec = await (await api.get('/openapi.yaml', {raw: true})).text(); } catch { /* an older bridge */ }
  const has = (path) => spec.includes('\n  ' + path + ':');
  const hasConfs = has('/astproxy/conferences') && await confs.load();
  $('#tab-confs').hidden = !hasConfs;
  const hasPres = has('/user/presencelist');
  live.topics(hasPres ? ['presence'] : []);
  if (hasPres) await mine.loadPresence();
}

async function start() {
  try {
    state.me = await api.get('/user/me');
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) { showLogin(); return; }
    showLogin(t('login.unreachable', {msg: e.message}));
    return;
  }
  $('#login-view').hidden = true;
  $('#app').hidden = false;
  $('#whoami').textContent = `${state.me.name || state.me.username} (${state.me.role})`;
  const from = $('#dial-from');
  from.replaceChildren(...myEndpoints().map((e) => el('option', {value: e}, e)));
  $('#dial-from-wrap').hidden = myEndpoints().length < 2;
  $('#dial-form').hidden = !can('call');
  history.loaded = false;
  showView('ext');
  await probe();
  live.start();
  renewal.start();
  $('#ext-search').focus({preventScroll: true});
}

function showLogin(msg = '') {
  $('#app').hidden = true;
  $('#login-view').hidden = false;
  $('#login-error').textContent = msg;
  $('#banner').hidden = true;
  $('#login-form').elements.username.focus();
}

// logout ends the session: why is '' when the user asked, else the
// i18n key of the reason the server ended it (the token is then not
// sent back).
async function logout(why) {
  renewal.stop();
  live.stop();
  popup.hide();
  menu.close(false);
  if (!why && api.token) {
    try { await api.post('/auth/logout'); } catch { /* logged out anyway */ }
  }
  api.setSession(null);
  state.me = null;
  state.exts = {};
  grid.setAll({});
  showLogin(why ? t(why) : '');
}

// relabel redraws everything after a language switch.
function relabel() {
  translatePage();
  refreshGroups(true);
  grid.refresh();
  grid.applyFilter();
  bar.key = '';
  bar.render();
  mine.render();
  for (const v of [queues, trunks, confs, wall]) v.render();
  banner();
}

function setupPrefs() {
  const langSel = $('#pref-lang');
  langSel.replaceChildren(...Object.entries(LANGS).map(([k, v]) => el('option', {value: k}, v)));
  langSel.value = lang;
  langSel.addEventListener('change', () => { setLang(langSel.value); relabel(); });
  const theme = $('#pref-theme');
  theme.value = prefs.theme;
  theme.addEventListener('change', () => prefs.setTheme(theme.value));
  const compact = $('#pref-compact');
  compact.checked = !!prefs.compact;
  compact.addEventListener('change', () => prefs.setCompact(compact.checked));
  prefs.apply();
}

api.onUnauthorized = () => { if (state.me) logout('login.expired'); };

$('#login-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const f = e.target.elements;
  $('#login-error').textContent = '';
  f.submit.disabled = true;
  try {
    const r = await api.post('/auth/login', {username: f.username.value.trim(), password: f.password.value});
    api.setSession(r);
    askNotify(); // a gesture: the browser may ask now
    f.password.value = '';
    await start();
  } catch (err) {
    $('#login-error').textContent = err.status === 401 ? t('login.bad') : err.status === 429 ? t('login.slow') : err.message;
  } finally {
    f.submit.disabled = false;
  }
});
$('#logout').addEventListener('click', () => logout(''));
$('#dial-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const n = e.target.elements.number.value.trim();
  if (n) call(n);
});
$('#ext-search').addEventListener('input', (e) => grid.setFilter({text: e.target.value.trim().toLowerCase()}));
// In the search box: ArrowDown or Enter goes to the first card found,
// Escape clears the search.
$('#ext-search').addEventListener('keydown', (e) => {
  if (e.key === 'ArrowDown' || e.key === 'Enter') {
    e.preventDefault();
    grid.focusFirst();
  } else if (e.key === 'Escape' && e.target.value) {
    e.preventDefault();
    e.target.value = '';
    grid.setFilter({text: ''});
  }
});
$('#ext-group').addEventListener('change', (e) => pickGroup(e.target.value));
document.addEventListener('keydown', (e) => {
  // "/" jumps to the search box, as in many web apps.
  if (e.key === '/' && !e.target.closest('input, textarea, select') && !$('#app').hidden) {
    e.preventDefault();
    showView('ext');
    $('#ext-search').focus();
  }
});
translatePage();
setupPrefs();
setupTabs();
setInterval(() => { grid.tick(); bar.tick(); queues.tick(); trunks.tick(); confs.tick(); wall.tick(); }, 1000);

// A tab reloaded logged in asks for notifications at a click (once per
// browser: askNotify remembers).
document.addEventListener('click', askNotify);
if (api.token) start();
else showLogin();
