// keel's web app (docs/web-app.md): what every part uses: DOM and API helpers,
// the safe Markdown subset, the app's state.

export const $ = (id) => document.getElementById(id);

/** An element with attributes and children (strings become text, never HTML). */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

/** A call of the server's API: its JSON answer, or an Error with the server's message. */
export async function api(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: {} };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
  if (!response.ok) {
    const message = json && json.error ? json.error.message : text || response.statusText;
    const error = new Error(message);
    error.status = response.status;
    error.code = json && json.error ? json.error.code : undefined;
    throw error;
  }
  return json;
}

// ---- Text: Markdown lives in markdown.js (re-exported here for the other modules). ----

export { renderMarkdown, inline } from './markdown.js';

/** An edit as lines taken out and put in (what the model sent: old and new text). */
export function renderDiff(before, after, path) {
  const a = before.split('\n');
  const b = after.split('\n');
  // Common lines at both ends stay as context; the middle is the change.
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start += 1;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) { endA -= 1; endB -= 1; }
  const lines = [];
  for (const line of a.slice(0, start)) lines.push(el('span', { class: 'ctx' }, `  ${line}\n`));
  for (const line of a.slice(start, endA)) lines.push(el('del', {}, `- ${line}\n`));
  for (const line of b.slice(start, endB)) lines.push(el('ins', {}, `+ ${line}\n`));
  for (const line of a.slice(endA)) lines.push(el('span', { class: 'ctx' }, `  ${line}\n`));
  return el('pre', { class: 'diff', 'aria-label': `diff of ${path}` }, lines);
}

export function textOf(content) {
  if (typeof content === 'string') return content;
  return (content || [])
    .filter((b) => b && (b.type === 'text' || b.type === undefined))
    .map((b) => b.text || '')
    .join('');
}

export function age(ms) {
  if (!ms) return '';
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}


// ---- The app's state, and the line under the title. ----

export const app = {
  sessions: [],
  folded: new Set(), // workspaces folded in the sidebar
  id: null,
  source: null,
  view: null,
};

/** A session's name: its title (or first prompt), else the end of its id. */
export function nameOf(s, id) {
  return (s && s.title) || `session ${String(id).slice(-8)}`;
}

/**
 * What a failed call says in the page: a server that is down, or that restarted (with a new
 * token), said as such.
 */
export function failure(what, e) {
  if (e && e.status === 401) {
    return 'the server does not know this page any more (it restarted with a new token): open the URL it printed';
  }
  // fetch() rejects (no status) when nothing answers: the server is down or restarting.
  if (e && e.status === undefined && e.name === 'TypeError') return 'the server is not answering: reconnecting…';
  return `${what}: ${e ? e.message : 'failed'}`;
}

export function showLink(text) {
  $('link').textContent = text || '';
}
