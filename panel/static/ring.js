// Ring alerts: a call to one of the user's phones is not missed when the
// panel sits in a background tab or behind another window. While the
// pop-up shows, a ring tone made in the page (no sound file: an
// oscillator in the cadence of a phone's ring), a desktop notification
// (the permission asked once, from a click), and the caller in the tab's
// title. All stop when the pop-up goes.

const ASKED = 'ctibridge.notifyAsked';
const CADENCE = 3000; // ms: two short bursts, then silence

let audio = null, osc = null, gain = null, beat = 0, note = null, title = '';

// askNotify asks, once per browser and from a user gesture, for the
// permission to show desktop notifications.
export function askNotify() {
  const N = window.Notification;
  if (!N || N.permission !== 'default') return;
  try {
    if (localStorage.getItem(ASKED)) return;
    localStorage.setItem(ASKED, '1');
  } catch { /* storage off: ask anyway */ }
  Promise.resolve(N.requestPermission()).catch(() => {});
}

// startRing alerts for a ringing call; caller is the text the pop-up shows.
export function startRing(caller, heading) {
  stopRing();
  title = document.title;
  document.title = `☎ ${caller} · ${title}`;
  tone();
  const N = window.Notification;
  if (N && N.permission === 'granted') {
    try {
      note = new N(heading, {body: caller, tag: 'ctibridge-ring', requireInteraction: true});
      note.onclick = () => { window.focus(); note?.close(); };
    } catch { /* notifications unavailable in this context */ }
  }
}

export function stopRing() {
  if (title) document.title = title;
  title = '';
  clearInterval(beat);
  beat = 0;
  try { osc?.stop(); } catch { /* already stopped */ }
  osc = gain = null;
  note?.close();
  note = null;
}

// tone rings in the page: 425 Hz (the European ring tone), 0.4 s on,
// 0.2 s off, 0.4 s on, every 3 s.
function tone() {
  const AC = window.AudioContext || window.webkitAudioContext;
  if (!AC) return;
  try {
    audio ??= new AC();
    if (audio.state === 'suspended') audio.resume().catch(() => {}); // needs an earlier gesture: the login was one
    osc = audio.createOscillator();
    gain = audio.createGain();
    osc.frequency.value = 425;
    gain.gain.value = 0;
    osc.connect(gain).connect(audio.destination);
    osc.start();
    const burst = () => {
      const t = audio.currentTime;
      for (const [v, at] of [[0.2, 0], [0, 0.4], [0.2, 0.6], [0, 1.0]]) gain.gain.setValueAtTime(v, t + at);
    };
    burst();
    beat = setInterval(burst, CADENCE);
  } catch { /* no audio output: the title and notification still tell */ }
}
