// The user's display choices, kept in localStorage: theme (the system's by
// default, prefers-color-scheme, or forced light/dark), compact cards, and
// the language (i18n.js keeps that one).

const THEME = 'ctibridge.theme', COMPACT = 'ctibridge.compact';

function get(k) { try { return localStorage.getItem(k) || ''; } catch { return ''; } }
function put(k, v) { try { localStorage.setItem(k, v); } catch { /* storage off */ } }

export const prefs = {
  theme: ['light', 'dark'].includes(get(THEME)) ? get(THEME) : 'auto',
  // Compact by default on a large directory is the app's call (app.js);
  // an explicit choice wins.
  compact: get(COMPACT) === '' ? null : get(COMPACT) === '1',

  setTheme(v) {
    this.theme = ['light', 'dark'].includes(v) ? v : 'auto';
    put(THEME, this.theme);
    this.apply();
  },
  setCompact(on) {
    this.compact = !!on;
    put(COMPACT, on ? '1' : '0');
    this.apply();
  },
  apply() {
    const d = document.documentElement;
    if (this.theme === 'auto') delete d.dataset.theme;
    else d.dataset.theme = this.theme;
    d.classList.toggle('compact', !!this.compact);
  },
};
