// keel's web app: one more front end of `keel serve` (docs/web-app.md). It renders a session's
// log as the server streams it (`GET /api/v1/sessions/{id}/events`, Server-Sent Events: one
// message per log event, its seq as the id, so the browser's EventSource reconnects with
// Last-Event-ID and nothing is lost or shown twice), and acts through the same HTTP API as
// every other client. No framework and no build step: this file is embedded in the binary.
// The page loads this module; it imports the others (lib.js, view.js, panels.js).

import { $, el, api, age, showLink, nameOf, app, failure } from './lib.js';
import { View } from './view.js';
import { showPage, showPlugins, showAutomation, submitSchedule, showTab } from './pages.js';
import { goalCommand } from './items.js';
import { showSettings, bindSettings, setTheme, theme } from './settings.js';
import { applyLanguage, language } from './i18n.js';
import {
  showTrust, loadState, loadJobs, loadCommands, runCommand, suggestCommands, search, setting,
  dataUrl, showAttached, refused, suggestPaths, takePath, firstPath,
} from './panels.js';

// ---- The sidebar: every session of the server, newest first. ----

export async function loadSessions() {
  try {
    const listed = await api('GET', '/api/v1/sessions');
    app.sessions = listed.sessions || [];
  } catch (e) {
    showLink(failure('cannot list the sessions', e));
    return;
  }
  renderSessions();
}


function renderSessions() {
  const current = app.sessions.find((s) => s.id === app.id);
  if (app.id) $('title').textContent = nameOf(current, app.id);
  const filter = $('filter').value.trim().toLowerCase();
  // A tree: each workspace (newest first) with its sessions (newest first), folded by hand.
  const groups = new Map();
  for (const s of app.sessions) {
    const title = nameOf(s, s.id);
    if (filter && !`${title} ${s.cwd || ''}`.toLowerCase().includes(filter)) continue;
    const key = s.cwd || '';
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(el('li', { class: `session status-${s.status}` },
      el('a', {
        href: `#/s/${encodeURIComponent(s.id)}`,
        'aria-current': s.id === app.id ? 'page' : null,
      }, title),
      el('span', { class: 'info' }, `${s.status} · ${age(s.updatedAt)}`)));
  }
  const list = $('sessions');
  list.replaceChildren(...[...groups].map(([cwd, items]) => {
    const name = cwd ? cwd.replace(/\/+$/, '').split('/').pop() || cwd : 'no workspace';
    const folded = app.folded.has(cwd);
    const group = el('details', { class: 'workspace', open: !folded },
      el('summary', { title: cwd }, name, el('span', { class: 'info' }, ` ${items.length}`)),
      el('ul', { 'aria-label': `Sessions in ${name}` }, items));
    group.addEventListener('toggle', () => {
      if (group.open) app.folded.delete(cwd);
      else app.folded.add(cwd);
    });
    return el('li', {}, group);
  }));
}

function openSession(id, at = null) {
  if (app.source) app.source.close();
  showPage(null);
  app.id = id;
  app.view = new View(id);
  if (at !== null) app.view.target = at;
  $('transcript').classList.remove('with-provenance');
  $('composer').hidden = false;
  $('takeover').hidden = true;
  const listed = app.sessions.find((s) => s.id === id);
  $('title').textContent = nameOf(listed, id);
  $('meta').textContent = listed ? listed.cwd || '' : '';
  $('export').href = `/api/v1/sessions/${encodeURIComponent(id)}/export`;
  $('session-links').hidden = false;
  showTrust(id, listed && listed.cwd);
  loadState(id);
  $('goal').hidden = true;
  $('todo-panel').hidden = true;
  $('jobs-panel').hidden = true;
  $('job-output').textContent = '';
  loadJobs(id);
  loadCommands(id);
  renderSessions();
  // With the plugins' items (the goal, a workflow's agents, a schedule firing …), as every
  // front end shows them.
  const source = new EventSource(`/api/v1/sessions/${encodeURIComponent(id)}/events?present=true`);
  app.source = source;
  const view = app.view;
  // The log's replay is over once the live stream's `pending` comes (a hosted session).
  source.addEventListener('pending', () => {
    if (!view.live) view.changedFiles();
    view.live = true;
    showLink('');
  });
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) {
      refused(id);
    } else if (!view.live) {
      // The stream of a session the server does not run ends; the browser looks again.
      showLink('not running on the server (stored): your next message resumes it');
    } else {
      view.live = false;
      showLink('reconnecting to the server…');
    }
  };
  source.onmessage = (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch (_) { return; }
    view.event(ev);
  };
  source.addEventListener('pending', (m) => view.pending(JSON.parse(m.data).requests || []));
  source.addEventListener('request', (m) => view.request(JSON.parse(m.data)));
  source.addEventListener('present', (m) => view.present(JSON.parse(m.data)));
  source.addEventListener('resolved', (m) => view.resolved(JSON.parse(m.data).requestId));
  $('message').focus();
}

async function send() {
  const box = $('message');
  const text = box.value;
  if (!text.trim() || !app.id) return;
  $('commands').hidden = true;
  $('mentions').hidden = true;
  const ran = text.startsWith('/') ? await runCommand(text) : null;
  if (ran !== null) {
    if (ran) box.value = '';
    return;
  }
  const picker = $('images');
  let images = [];
  try {
    images = await Promise.all(Array.from(picker.files || []).map(dataUrl));
  } catch (e) {
    showLink(`an image could not be read: ${e.message}`);
    return;
  }
  box.value = '';
  try {
    const body = { text, delivery: 'queue' };
    if (images.length) body.images = images;
    await api('POST', `/api/v1/sessions/${encodeURIComponent(app.id)}/messages`, body);
    picker.value = '';
    showAttached();
    loadSessions();
  } catch (e) {
    box.value = text;
    showLink(`not sent: ${e.message}`);
  }
}

async function stop() {
  if (!app.id) return;
  try {
    await api('POST', `/api/v1/sessions/${encodeURIComponent(app.id)}/cancel`, {});
  } catch (e) {
    showLink(`not stopped: ${e.message}`);
  }
}

async function create(cwd) {
  try {
    const created = await api('POST', '/api/v1/sessions', { cwd });
    $('new-form').hidden = true;
    await loadSessions();
    location.hash = `#/s/${encodeURIComponent(created.id)}`;
  } catch (e) {
    showLink(`no session created: ${e.message}`);
  }
}

function route() {
  // `#/s/ID`, or `#/s/ID/m/SEQ`: a message of it (a link copied with Link under an answer).
  const match = /^#\/s\/([^/]+)(?:\/m\/(\d+))?$/.exec(location.hash);
  if (match) {
    const id = decodeURIComponent(match[1]);
    const at = match[2] === undefined ? null : Number(match[2]);
    if (app.view && app.view.id === id && at !== null) app.view.reveal(at);
    else openSession(id, at);
    return;
  }
  if (location.hash === '#/settings') {
    showSettings();
    return;
  }
  if (location.hash === '#/automation') {
    showAutomation();
    return;
  }
  const plugins = /^#\/plugins(?:\?cwd=(.+))?$/.exec(location.hash);
  if (plugins) {
    showPlugins(plugins[1] ? decodeURIComponent(plugins[1]) : '');
    return;
  }
  // `keel web DIR`: the new-session form, for DIR.
  const fresh = /^#\/new\?cwd=(.+)$/.exec(location.hash);
  if (fresh) {
    $('new-form').hidden = false;
    $('new-cwd').value = decodeURIComponent(fresh[1]);
    $('new-cwd').focus();
  }
}

document.addEventListener('DOMContentLoaded', async () => {
  setTheme(theme());
  applyLanguage(language());
  bindSettings();
  $('new-session').addEventListener('click', () => {
    const form = $('new-form');
    form.hidden = false;
    const input = $('new-cwd');
    if (!input.value) {
      const current = app.sessions.find((s) => s.id === app.id) || app.sessions[0];
      input.value = current && current.cwd ? current.cwd : '';
    }
    input.focus();
  });
  $('new-cancel').addEventListener('click', () => { $('new-form').hidden = true; });
  $('new-form').addEventListener('submit', (e) => {
    e.preventDefault();
    create($('new-cwd').value.trim());
  });
  $('plugins-form').addEventListener('submit', (e) => {
    e.preventDefault();
    location.hash = `#/plugins?cwd=${encodeURIComponent($('plugins-cwd').value.trim())}`;
  });
  $('tab-chat').addEventListener('click', () => showTab('chat'));
  $('tab-trajectory').addEventListener('click', () => showTab('trajectory'));
  for (const word of ['pause', 'resume', 'clear']) {
    $(`goal-${word}`).addEventListener('click', () => { if (app.id) goalCommand(app.id, word); });
  }
  $('schedule-form').addEventListener('submit', (e) => { e.preventDefault(); submitSchedule(); });
  $('filter').addEventListener('input', renderSessions);
  $('search-form').addEventListener('submit', (e) => { e.preventDefault(); search($('search').value); });
  $('composer').addEventListener('submit', (e) => { e.preventDefault(); send(); });
  $('stop').addEventListener('click', stop);
  $('images').addEventListener('change', showAttached);
  $('message').addEventListener('input', suggestCommands);
  $('message').addEventListener('input', suggestPaths);
  $('mode').addEventListener('change', () => setting('mode', { mode: $('mode').value }, `mode ${$('mode').value}`));
  $('model').addEventListener('change', () => setting('model', { model: $('model').value.trim() }, `model ${$('model').value.trim()}`));
  $('effort').addEventListener('change', () => {
    if ($('effort').value) setting('model', { effort: $('effort').value }, `effort ${$('effort').value}`);
  });
  $('message').addEventListener('keydown', (e) => {
    const path = e.key === 'Tab' ? firstPath() : null;
    if (path) {
      e.preventDefault();
      takePath(path);
    } else if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    } else if (e.key === 'Escape') {
      e.preventDefault();
      stop();
    }
  });
  window.addEventListener('hashchange', route);
  await loadSessions();
  route();
  setInterval(loadSessions, 5000);
});

