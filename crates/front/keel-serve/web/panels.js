// keel's web app (docs/web-app.md): what sits around a session: search, trust,
// settings, jobs, images and `/` commands.

import { $, el, api, showLink, nameOf, app, failure } from './lib.js';

// ---- Full-text search across every session (`GET /api/v1/sessions?q=`). ----

export async function search(query) {
  const nav = $('results-nav');
  const list = $('results');
  if (!query.trim()) {
    nav.hidden = true;
    list.replaceChildren();
    return;
  }
  let found;
  try {
    found = await api('GET', `/api/v1/sessions?q=${encodeURIComponent(query)}`);
  } catch (e) {
    showLink(`search failed: ${e.message}`);
    return;
  }
  list.replaceChildren();
  for (const hit of found.sessions || []) {
    const listed = app.sessions.find((s) => s.id === hit.id);
    list.append(el('li', { class: 'hit' },
      el('a', { href: `#/s/${encodeURIComponent(hit.id)}` }, nameOf(listed, hit.id)),
      el('span', { class: 'info' }, hit.snippet || '')));
  }
  if (!list.childNodes.length) list.append(el('li', { class: 'info' }, `nothing found for “${query}”`));
  nav.hidden = false;
}

// ---- Workspace trust: asked in the page for an undecided workspace (`/api/v1/trust`). ----

export async function showTrust(id, cwd, decided) {
  const box = $('trust');
  box.hidden = true;
  box.replaceChildren();
  if (!cwd) return;
  // A decision just recorded is said here, where it was asked (the line under the title also
  // says how the session's stream is).
  if (decided) {
    box.append(el('p', { class: 'notice', role: 'status' }, decided));
    box.hidden = false;
  }
  let ws;
  try {
    ws = await api('GET', `/api/v1/trust?cwd=${encodeURIComponent(cwd)}`);
  } catch (_) {
    return;
  }
  if (app.id !== id) return;
  const decide = (level) => async () => {
    try {
      const before = ws.level;
      const after = await api('POST', '/api/v1/trust', { cwd, level });
      // A hosted session keeps the agent it was built with: closed, its next message resumes
      // it on an agent built with the decision.
      if (after.level !== before && !(app.view && app.view.running)) {
        await api('POST', `/api/v1/sessions/${encodeURIComponent(id)}/close`, {}).catch(() => null);
      }
      showTrust(id, cwd, `${after.root} is now ${after.level}: from the session's next message`);
    } catch (e) {
      showLink(`not recorded: ${e.message}`);
    }
  };
  const files = (ws.files || []).map((f) => el('li', {}, `${f.file}: ${(f.what || []).join(', ')}`));
  if (ws.ask) {
    box.append(el('div', { role: 'dialog', 'aria-label': 'Trust this workspace?', class: 'trust' },
      el('h2', {}, 'Trust this workspace?'),
      el('p', {}, `${ws.root} has files that would run code or widen what keel may do. Until you trust it, keel leaves them alone:`),
      files.length ? el('ul', {}, files) : null,
      el('div', { class: 'row' },
        el('button', { type: 'button', onclick: decide('trusted') }, 'Trust'),
        el('button', { type: 'button', onclick: decide('untrusted') }, 'Do not trust'))));
    box.hidden = false;
  } else if (ws.notice) {
    box.append(el('p', { class: 'notice' }, ws.notice));
    box.hidden = false;
  }
}

// ---- The session's settings: mode, model, effort (`GET`/`POST /api/v1/sessions/{id}/…`). ----

export async function loadState(id) {
  let state;
  try {
    state = await api('GET', `/api/v1/sessions/${encodeURIComponent(id)}`);
  } catch (_) {
    return;
  }
  if (app.id !== id) return;
  // Where it came from: the session it was delegated (a subagent) or forked from.
  const lineage = $('lineage');
  lineage.replaceChildren();
  if (state.parent) {
    lineage.append(`${state.origin === 'subagent' ? 'a subagent of' : `${state.origin || 'branched'} from`} `,
      el('a', { href: `#/s/${encodeURIComponent(state.parent)}` }, nameOf(app.sessions.find((s) => s.id === state.parent), state.parent)));
  }
  lineage.hidden = !state.parent;
  $('mode').value = state.plan ? 'plan' : state.mode || 'default';
  $('model').value = state.model || '';
  $('effort').value = state.effort || '';
  // Tool cards offer their formation graph when the session records provenance.
  $('transcript').classList.toggle('with-provenance', !!state.provenance);
}

export async function setting(path, body, what) {
  if (!app.id) return;
  try {
    await api('POST', `/api/v1/sessions/${encodeURIComponent(app.id)}/${path}`, body);
    showLink(`${what} set`);
  } catch (e) {
    showLink(`${what} not set: ${e.message}`);
  }
  loadState(app.id);
}


/** The event stream was refused: say why, in the server's words. */
export async function refused(id) {
  try {
    await api('GET', `/api/v1/sessions/${encodeURIComponent(id)}`);
    showLink('the server refused the event stream: reload the page');
  } catch (e) {
    showLink(failure('this session cannot be shown', e));
  }
}

// ---- Background jobs and subagents (`GET …/jobs`, `GET …/jobs/{jobId}`, `POST …/kill`). ----

export async function loadJobs(id) {
  let listed;
  try {
    listed = await api('GET', `/api/v1/sessions/${encodeURIComponent(id)}/jobs`);
  } catch (_) {
    return;
  }
  if (app.id !== id) return;
  const jobs = listed.jobs || [];
  const running = jobs.filter((j) => j.status === 'running').length;
  $('jobs-summary').textContent = `Jobs (${running} running, ${jobs.length} in all)`;
  const path = (job) => `/api/v1/sessions/${encodeURIComponent(id)}/jobs/${encodeURIComponent(job.id)}`;
  $('jobs').replaceChildren(...jobs.map((job) => el('li', { class: 'job' },
    el('span', { class: 'name' }, job.id), ` ${job.description || ''} `,
    el('span', { class: 'info' }, `${job.status}${job.waiting ? ' (waiting)' : ''}`), ' ',
    el('button', {
      type: 'button', class: 'link', 'aria-label': `Output of ${job.id}`,
      onclick: async () => {
        try {
          const shown = await api('GET', path(job));
          $('job-output').textContent = shown.output || '';
        } catch (e) {
          showLink(`no output: ${e.message}`);
        }
      },
    }, 'Output'), ' ',
    job.status === 'running' ? el('button', {
      type: 'button', class: 'link', 'aria-label': `Stop ${job.id}`,
      onclick: async () => {
        try {
          await api('POST', `${path(job)}/kill`, {});
        } catch (e) {
          showLink(`not stopped: ${e.message}`);
        }
        loadJobs(id);
      },
    }, 'Stop') : null)));
  $('jobs-panel').hidden = !jobs.length;
}

/** A file as a `data:` URL (what `POST …/messages` takes as an image). */
export function dataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

export function showAttached() {
  const files = Array.from($('images').files || []);
  $('attached').textContent = files.length ? `${files.length} image${files.length === 1 ? '' : 's'}: ${files.map((f) => f.name).join(', ')}` : '';
}

// ---- `/` commands (`GET …/commands`, `POST …/commands/{name}`). ----

export async function loadCommands(id) {
  try {
    const listed = await api('GET', `/api/v1/sessions/${encodeURIComponent(id)}/commands`);
    if (app.id === id) app.commands = listed.commands || [];
  } catch (_) {
    app.commands = [];
  }
}

/** The commands matching what is typed after `/`, offered under the composer. */
export function suggestCommands() {
  const list = $('commands');
  const text = $('message').value;
  const match = /^\/(\S*)$/.exec(text);
  const offered = match ? (app.commands || []).filter((c) => c.name.startsWith(match[1])) : [];
  list.replaceChildren(...offered.slice(0, 8).map((c) => el('li', {},
    el('button', {
      type: 'button', class: 'link',
      onclick: () => {
        $('message').value = `/${c.name} `;
        list.hidden = true;
        $('message').focus();
      },
    }, `/${c.name}`),
    c.argumentHint ? ` ${c.argumentHint}` : '',
    el('span', { class: 'info' }, ` — ${c.description || ''}`))));
  list.hidden = !offered.length;
}

/** `/name args` for a command the session offers: run it there. False when it is none. */
/**
 * Run `text` when it names one of the session's commands: `null` when it does not (it is a
 * message), else whether the server took it (a refused command stays in the composer, to be
 * fixed or sent again once the turn has ended).
 */
export async function runCommand(text) {
  const match = /^\/(\S+)\s*([\s\S]*)$/.exec(text.trim());
  if (!match || !(app.commands || []).some((c) => c.name === match[1])) return null;
  try {
    const done = await api('POST', `/api/v1/sessions/${encodeURIComponent(app.id)}/commands/${encodeURIComponent(match[1])}`, { args: match[2] });
    showLink(done && done.message ? done.message : `/${match[1]}: queued`);
    return true;
  } catch (e) {
    showLink(`/${match[1]}: ${e.message}`);
    return false;
  }
}

// ---- `@path` completion in the composer (`GET …/paths?prefix=`), as the terminal UI does. ----

let mentionAsked = 0;

/** The `@word` being typed at the caret: its start in the text and what follows `@`. */
function mentionAt(box) {
  const before = box.value.slice(0, box.selectionStart);
  const match = /(^|\s)@(\S*)$/.exec(before);
  return match ? { start: before.length - match[2].length - 1, prefix: match[2] } : null;
}

export async function suggestPaths() {
  const list = $('mentions');
  const box = $('message');
  const mention = mentionAt(box);
  if (!mention || !app.id) {
    list.hidden = true;
    return;
  }
  const asked = ++mentionAsked;
  let found;
  try {
    found = await api('GET', `/api/v1/sessions/${encodeURIComponent(app.id)}/paths?prefix=${encodeURIComponent(mention.prefix)}`);
  } catch (_) {
    return;
  }
  if (asked !== mentionAsked) return; // a later keystroke asked again
  const paths = found.paths || [];
  list.replaceChildren(...paths.map((path) => el('li', {},
    el('button', { type: 'button', class: 'link', onclick: () => takePath(path) }, `@${path}`))));
  list.hidden = !paths.length;
}

/** Put `@path` in place of the `@word` being typed; a directory goes on completing. */
export function takePath(path) {
  const box = $('message');
  const mention = mentionAt(box);
  if (!mention) return;
  const end = box.selectionStart;
  const insert = `@${path}${path.endsWith('/') ? '' : ' '}`;
  box.value = box.value.slice(0, mention.start) + insert + box.value.slice(end);
  const caret = mention.start + insert.length;
  box.setSelectionRange(caret, caret);
  box.focus();
  $('mentions').hidden = true;
  if (path.endsWith('/')) suggestPaths();
}

/** The first path offered, when the list shows (Tab takes it). */
export function firstPath() {
  const first = $('mentions').hidden ? null : $('mentions').querySelector('button');
  return first ? first.textContent.slice(1) : null;
}
