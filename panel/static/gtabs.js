// Group tabs over the grid: Everyone, My extensions and each queue's
// members as tabs (one tab stop, arrow keys, Home/End), kept in step
// with the Show selector, which also has the statuses.

import {el} from './util.js';

export class GroupTabs {
  // onPick(value): a tab was chosen (the value of the Show selector).
  constructor(root, onPick) {
    this.root = root;
    this.onPick = onPick;
    root.addEventListener('keydown', (e) => this.onKey(e));
  }

  // render draws one tab per [value, label]; hidden with fewer than two.
  render(groups, current) {
    this.root.replaceChildren(...groups.map(([value, label]) => el('button', {type: 'button', role: 'tab', 'data-group': value,
      'aria-controls': 'grid', onclick: () => this.onPick(value)}, label)));
    this.root.hidden = groups.length < 2;
    this.select(current);
  }

  // select marks the tab of value (none when the selector shows a status).
  select(value) {
    const tabs = [...this.root.children];
    const on = tabs.find((b) => b.dataset.group === value);
    for (const b of tabs) {
      b.setAttribute('aria-selected', String(b === on));
      b.tabIndex = b === (on || tabs[0]) ? 0 : -1;
    }
  }

  onKey(e) {
    const tabs = [...this.root.children];
    const i = tabs.indexOf(document.activeElement);
    if (i < 0) return;
    let j = -1;
    if (e.key === 'ArrowRight') j = (i + 1) % tabs.length;
    if (e.key === 'ArrowLeft') j = (i + tabs.length - 1) % tabs.length;
    if (e.key === 'Home') j = 0;
    if (e.key === 'End') j = tabs.length - 1;
    if (j < 0) return;
    e.preventDefault();
    this.onPick(tabs[j].dataset.group);
    tabs[j].focus();
  }
}
