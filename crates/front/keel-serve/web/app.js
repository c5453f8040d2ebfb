// keel's web app: one more front end of `keel serve` (docs/web-app.md). It renders a session's
// log as the server streams it (`GET /api/v1/sessions/{id}/events`, Server-Sent Events: one
// message per log event, its seq as the id, so the browser's EventSource reconnects with
// Last-Event-ID and nothing is lost or shown twice), and acts through the same HTTP API as
// every other client. No framework and no build step: this file is embedded in the binary.
'use strict';

const $ = (id) => document.getElementById(id);

/** An element with attributes and children (strings become text, never HTML). */
function el(tag, attrs, ...children) {
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
async function api(method, path, body) {
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

// ---- Text: a small, safe Markdown subset (fenced code, inline code, bold, paragraphs). ----

function renderMarkdown(text) {
  const out = el('div', { class: 'md' });
  const parts = String(text).split(/^```/m);
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      const newline = part.indexOf('\n');
      const lang = newline > 0 ? part.slice(0, newline).trim() : '';
      const code = newline >= 0 ? part.slice(newline + 1) : part;
      out.append(el('pre', { class: 'code', 'data-lang': lang || null },
        el('code', {}, code.replace(/\n$/, ''))));
      return;
    }
    for (const para of part.split(/\n{2,}/)) {
      if (!para.trim()) continue;
      out.append(inline(el('p'), para));
    }
  });
  return out;
}

function inline(node, text) {
  const tokens = text.split(/(`[^`\n]+`|\*\*[^*\n]+\*\*)/);
  for (const token of tokens) {
    if (token.startsWith('`') && token.endsWith('`') && token.length > 1) {
      node.append(el('code', {}, token.slice(1, -1)));
    } else if (token.startsWith('**') && token.endsWith('**') && token.length > 4) {
      node.append(el('strong', {}, token.slice(2, -2)));
    } else if (token) {
      token.split('\n').forEach((line, i) => {
        if (i > 0) node.append(el('br'));
        node.append(line);
      });
    }
  }
  return node;
}

/** An edit as lines taken out and put in (what the model sent: old and new text). */
function renderDiff(before, after, path) {
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

function textOf(content) {
  if (typeof content === 'string') return content;
  return (content || [])
    .filter((b) => b && (b.type === 'text' || b.type === undefined))
    .map((b) => b.text || '')
    .join('');
}

function age(ms) {
  if (!ms) return '';
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

// ---- The sidebar: every session of the server, newest first. ----

const app = {
  sessions: [],
  id: null,
  source: null,
  view: null,
};

async function loadSessions() {
  try {
    const listed = await api('GET', '/api/v1/sessions');
    app.sessions = listed.sessions || [];
  } catch (e) {
    showLink(`cannot list the sessions: ${e.message}`);
    return;
  }
  renderSessions();
}

/** A session's name: its title (or first prompt), else the end of its id. */
function nameOf(s, id) {
  return (s && s.title) || `session ${String(id).slice(-8)}`;
}

function renderSessions() {
  const current = app.sessions.find((s) => s.id === app.id);
  if (app.id) $('title').textContent = nameOf(current, app.id);
  const filter = $('filter').value.trim().toLowerCase();
  const list = $('sessions');
  list.replaceChildren();
  for (const s of app.sessions) {
    const title = nameOf(s, s.id);
    if (filter && !`${title} ${s.cwd || ''}`.toLowerCase().includes(filter)) continue;
    const link = el('a', {
      href: `#/s/${encodeURIComponent(s.id)}`,
      'aria-current': s.id === app.id ? 'page' : null,
    }, title);
    list.append(el('li', { class: `session status-${s.status}` },
      link,
      el('span', { class: 'info' }, `${s.status} · ${age(s.updatedAt)}`)));
  }
}

function showLink(text) {
  $('link').textContent = text || '';
}

// ---- A session's view: its log, event by event. ----

class View {
  constructor(id) {
    this.id = id;
    this.transcript = $('transcript');
    this.transcript.replaceChildren();
    this.steps = new Map(); // "turn/step" -> { node, blocks: Map(index -> node) }
    this.cards = new Map(); // callId -> card
    this.requests = new Map(); // requestId -> request
    this.running = false;
    this.rewinds = []; // surface/rewind events: { seq, to }
    this.seq = 0; // the seq of the event being rendered
    this.stats = { turns: 0, steps: 0, input: 0, output: 0, cached: 0, rate: null };
    this.stepStarted = new Map(); // "turn/step" -> time of its first chunk
    $('stats').textContent = '';
  }

  /** The strip under the title: turns, steps, tokens, cache hits, the last step's speed. */
  renderStats() {
    const s = this.stats;
    const parts = [`${s.turns} turn${s.turns === 1 ? '' : 's'}`, `${s.steps} step${s.steps === 1 ? '' : 's'}`];
    if (s.input || s.output) {
      parts.push(`${s.input.toLocaleString('en')} in / ${s.output.toLocaleString('en')} out tokens`);
      if (s.input) parts.push(`cache hit ${Math.round((100 * s.cached) / s.input)} %`);
    }
    if (s.rate) parts.push(`${s.rate.toFixed(0)} tok/s`);
    $('stats').textContent = parts.join(' · ');
  }

  /** The person's message, with what can be done from it: rewind to it, fork from it. */
  userMessage(seq, text, images) {
    const rewind = async () => {
      try {
        const done = await api('POST', `/api/v1/sessions/${encodeURIComponent(this.id)}/rewind`, { to: seq, scope: 'both' });
        showLink(done.message || 'rewound');
        const box = $('message');
        if (!box.value) box.value = text;
      } catch (e) {
        showLink(`not rewound: ${e.message}`);
      }
    };
    const fork = async () => {
      try {
        const forked = await api('POST', `/api/v1/sessions/${encodeURIComponent(this.id)}/fork`, { at: seq });
        await loadSessions();
        location.hash = `#/s/${encodeURIComponent(forked.id)}`;
        showLink(`forked just before this message: session ${forked.id}`);
        const box = $('message');
        if (!box.value) box.value = text;
      } catch (e) {
        showLink(`not forked: ${e.message}`);
      }
    };
    this.append(el('div', { class: 'msg user' },
      renderMarkdown(text),
      images ? el('p', { class: 'info' }, `with ${images} image${images === 1 ? '' : 's'}`) : null,
      el('div', { class: 'actions' },
        el('button', { type: 'button', class: 'link', 'aria-label': `Rewind to before: ${text.slice(0, 60)}`, onclick: rewind }, 'Rewind'),
        el('button', { type: 'button', class: 'link', 'aria-label': `Fork from before: ${text.slice(0, 60)}`, onclick: fork }, 'Fork'))));
  }

  /**
   * What the conversation shows after rewinds: walking back from the end, a rewind at seq R
   * to T hides everything from T up to R (its own undo, a later rewind to before R, shows it
   * again). Every rendered node carries the seq of the event that made it.
   */
  applySurface() {
    const intervals = [];
    let end = Infinity;
    for (let i = this.rewinds.length - 1; i >= 0; i -= 1) {
      const r = this.rewinds[i];
      if (r.seq >= end) continue;
      intervals.push([r.seq + 1, end]);
      end = r.to;
    }
    intervals.push([0, end]);
    const shown = (seq) => intervals.some(([from, to]) => seq >= from && seq < to);
    for (const node of this.transcript.children) {
      const seq = Number(node.dataset.seq);
      if (!Number.isNaN(seq)) node.hidden = !shown(seq);
    }
  }

  event(ev) {
    const data = ev.data || {};
    this.seq = ev.seq;
    // The last event rendered, for readers of the page (tests, benchmarks).
    this.transcript.dataset.last = String(ev.seq);
    switch (ev.type) {
      case 'user/message': {
        const source = data.source ? data.source.kind : 'user';
        if (source !== 'user' && source !== undefined) return;
        this.userMessage(ev.seq, textOf(data.content),
          (data.content || []).filter((b) => b && b.type === 'image').length);
        return;
      }
      case 'surface/rewind':
        this.rewinds.push({ seq: ev.seq, to: data.toSeq });
        this.applySurface();
        return;
      case 'assistant/chunk': {
        const key = `${data.turn}/${data.step}`;
        if (!this.stepStarted.has(key)) this.stepStarted.set(key, ev.time);
        this.chunk(data);
        return;
      }
      case 'assistant/message': {
        const usage = data.usage || {};
        const s = this.stats;
        s.steps += 1;
        s.input += usage.inputTokens || 0;
        s.output += usage.outputTokens || 0;
        s.cached += usage.cacheReadTokens || 0;
        const started = this.stepStarted.get(`${data.turn}/${data.step}`);
        if (started && ev.time > started && usage.outputTokens) {
          s.rate = usage.outputTokens / ((ev.time - started) / 1000);
        }
        this.renderStats();
        this.message(data);
        return;
      }
      case 'tool/call':
        this.toolCall(data);
        return;
      case 'tool/result':
        this.toolResult(data);
        return;
      case 'turn/start':
        this.stats.turns += 1;
        this.renderStats();
        this.setRunning(true);
        return;
      case 'turn/end': {
        this.setRunning(false);
        if (this.live) {
          loadSessions();
          loadState(this.id);
          loadJobs(this.id);
        }
        const reason = data.reason ? data.reason.kind : 'completed';
        this.append(el('div', { class: 'turn-end' }, `turn ${data.turn} ${reason}`));
        return;
      }
      case 'todo/write':
        this.todos(data.todos);
        return;
      case 'compaction/end':
        this.append(el('div', { class: 'marker' }, 'history compacted'));
        return;
      default:
    }
  }

  step(data) {
    const key = `${data.turn}/${data.step}`;
    let step = this.steps.get(key);
    if (!step) {
      step = { node: el('div', { class: 'msg assistant' }), blocks: new Map(), done: false };
      this.steps.set(key, step);
      this.append(step.node);
    }
    return step;
  }

  chunk(data) {
    const chunk = data.chunk || {};
    const step = this.step(data);
    if (step.done) return;
    if (chunk.type === 'block-start') {
      if (chunk.blockType === 'text') {
        const node = el('div', { class: 'text streaming' });
        step.blocks.set(chunk.index, node);
        step.node.append(node);
      } else if (chunk.blockType === 'reasoning') {
        const body = el('div', { class: 'reasoning-text' });
        const node = el('details', { class: 'reasoning' }, el('summary', {}, 'Thinking'), body);
        step.blocks.set(chunk.index, body);
        step.node.append(node);
      }
    } else if (chunk.type === 'text-delta' || chunk.type === 'reasoning-delta') {
      const node = step.blocks.get(chunk.index);
      if (node) node.append(chunk.text || '');
      this.follow();
    }
  }

  message(data) {
    const step = this.step(data);
    step.done = true;
    const content = (data.message && data.message.content) || [];
    step.node.replaceChildren();
    for (const block of content) {
      if (block.type === 'text' && block.text) step.node.append(renderMarkdown(block.text));
      if (block.type === 'reasoning' && block.text) {
        step.node.append(el('details', { class: 'reasoning' },
          el('summary', {}, 'Thinking'), el('div', { class: 'reasoning-text' }, block.text)));
      }
    }
    if (!step.node.childNodes.length) step.node.remove();
  }

  toolCall(data) {
    let args = {};
    try { args = typeof data.arguments === 'string' ? JSON.parse(data.arguments) : data.arguments || {}; } catch (_) { args = {}; }
    const what = args.command || args.path || args.file_path || args.pattern || args.query || '';
    const output = el('pre', { class: 'output', 'aria-label': `${data.name} output` });
    const diff = typeof args.old_string === 'string' && typeof args.new_string === 'string'
      ? renderDiff(args.old_string, args.new_string, what)
      : null;
    const state = el('span', { class: 'state' }, 'running');
    const card = el('details', { class: 'tool', open: true, 'data-call': data.callId },
      el('summary', {}, el('span', { class: 'name' }, data.name), ' ',
        el('span', { class: 'what' }, what), ' ', state),
      diff,
      output);
    this.cards.set(data.callId, { card, output, state });
    this.append(card);
  }

  toolResult(data) {
    const message = data.message || {};
    for (const block of message.content || []) {
      if (block.type !== 'tool-result') continue;
      const entry = this.cards.get(block.toolCallId);
      if (!entry) continue;
      entry.output.textContent = textOf(block.content);
      entry.state.textContent = block.isError ? 'failed' : 'done';
      entry.card.classList.toggle('error', !!block.isError);
    }
    this.follow();
  }

  append(node) {
    if (node.dataset.seq === undefined) node.dataset.seq = String(this.seq);
    this.transcript.append(node);
    this.follow();
  }

  follow() {
    const t = this.transcript;
    t.scrollTop = t.scrollHeight;
  }

  setRunning(running) {
    this.running = running;
    $('stop').hidden = !running;
  }

  // ---- Requests put to the person: an approval or a question, in place of the composer. ----

  request(request) {
    this.requests.set(request.requestId, request);
    this.renderTakeover();
  }

  resolved(requestId) {
    this.requests.delete(requestId);
    this.renderTakeover();
  }

  pending(requests) {
    this.requests.clear();
    for (const r of requests) this.requests.set(r.requestId, r);
    this.renderTakeover();
  }

  renderTakeover() {
    const box = $('takeover');
    const [request] = this.requests.values();
    if (!request) {
      box.hidden = true;
      box.replaceChildren();
      $('composer').hidden = false;
      return;
    }
    $('composer').hidden = true;
    box.hidden = false;
    box.replaceChildren(request.kind === 'question' ? this.questionForm(request) : this.approvalForm(request));
  }

  approvalForm(request) {
    const args = request.arguments || {};
    if (request.tool === 'exit_plan_mode') return this.planForm(request, args);
    const what = args.command || args.path || JSON.stringify(args);
    const answer = (decision) => async () => {
      try {
        await api('POST', `/api/v1/sessions/${encodeURIComponent(this.id)}/approvals/${encodeURIComponent(request.requestId)}`, { decision });
      } catch (e) {
        showLink(`the answer was not taken: ${e.message}`);
      }
    };
    return el('div', { role: 'dialog', 'aria-label': `Allow ${request.tool}?`, class: 'approval' },
      el('h2', {}, `Allow ${request.tool}?`),
      el('pre', { class: 'output' }, what),
      request.reason ? el('p', { class: 'reason' }, request.reason) : null,
      el('div', { class: 'row' },
        el('button', { type: 'button', onclick: answer('allow') }, 'Approve'),
        el('button', { type: 'button', onclick: answer('allow_always') }, 'Approve for the session'),
        el('button', { type: 'button', onclick: answer('deny') }, 'Deny')));
  }

  /** The plan the model offers: read as Markdown; approving it leaves plan mode. */
  planForm(request, args) {
    const answer = (decision) => async () => {
      try {
        await api('POST', `/api/v1/sessions/${encodeURIComponent(this.id)}/approvals/${encodeURIComponent(request.requestId)}`, { decision });
      } catch (e) {
        showLink(`the answer was not taken: ${e.message}`);
      }
    };
    return el('div', { role: 'dialog', 'aria-label': 'Approve the plan?', class: 'approval plan' },
      el('h2', {}, 'Approve the plan?'),
      el('div', { class: 'plan-text' }, renderMarkdown(args.plan || '')),
      el('div', { class: 'row' },
        el('button', { type: 'button', onclick: answer('allow') }, 'Approve plan'),
        el('button', { type: 'button', onclick: answer('deny') }, 'Keep planning')));
  }

  /** The model's todo list (`todo/write`: the whole list each time). */
  todos(list) {
    const items = list || [];
    const done = items.filter((t) => t.status === 'completed').length;
    $('todo-summary').textContent = `Todo (${done}/${items.length})`;
    $('todo').replaceChildren(...items.map((t) => el('li', { class: `todo ${t.status}` },
      el('span', { class: 'mark', 'aria-hidden': 'true' }, t.status === 'completed' ? '✓' : t.status === 'in_progress' ? '▸' : '○'),
      ` ${t.content}`, el('span', { class: 'visually-hidden' }, ` (${t.status})`))));
    $('todo-panel').hidden = !items.length;
  }

  questionForm(request) {
    const questions = request.questions || [];
    const form = el('form', { role: 'dialog', 'aria-label': 'Questions', class: 'questions' });
    const multi = (q) => !!(q.multiSelect || q.multi_select);
    questions.forEach((q, i) => {
      const name = `q${i}`;
      const fieldset = el('fieldset', {}, el('legend', {}, q.question || q.header || `Question ${i + 1}`));
      const options = q.options || [];
      for (const option of options) {
        fieldset.append(el('label', {},
          el('input', { type: multi(q) ? 'checkbox' : 'radio', name, value: option.label }),
          ` ${option.label}`,
          option.description ? el('span', { class: 'info' }, ` — ${option.description}`) : null));
      }
      if (!options.length) {
        fieldset.append(el('label', {}, el('span', { class: 'visually-hidden' }, 'Answer'),
          el('input', { type: 'text', name, 'aria-label': q.question || 'Answer' })));
      }
      form.append(fieldset);
    });
    form.append(el('div', { class: 'row' },
      el('button', { type: 'submit' }, 'Answer'),
      el('button', { type: 'button', onclick: () => this.answer(request, { declined: true }) }, 'Decline')));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const data = new FormData(form);
      const answers = {};
      questions.forEach((q, i) => {
        const picked = data.getAll(`q${i}`).map(String).filter((v) => v.trim());
        if (multi(q)) answers[q.id] = picked;
        else if (picked.length) answers[q.id] = picked[0];
      });
      this.answer(request, { answers });
    });
    return form;
  }

  async answer(request, body) {
    try {
      await api('POST', `/api/v1/sessions/${encodeURIComponent(this.id)}/questions/${encodeURIComponent(request.requestId)}`, body);
    } catch (err) {
      showLink(`the answers were not taken: ${err.message}`);
    }
  }
}

// ---- Full-text search across every session (`GET /api/v1/sessions?q=`). ----

async function search(query) {
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

async function showTrust(id, cwd) {
  const box = $('trust');
  box.hidden = true;
  box.replaceChildren();
  if (!cwd) return;
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
      showLink(`${after.root} is now ${after.level}: from the session's next message`);
      showTrust(id, cwd);
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

function openSession(id) {
  if (app.source) app.source.close();
  app.id = id;
  app.view = new View(id);
  $('composer').hidden = false;
  $('takeover').hidden = true;
  const listed = app.sessions.find((s) => s.id === id);
  $('title').textContent = nameOf(listed, id);
  $('meta').textContent = listed ? listed.cwd || '' : '';
  $('export').href = `/api/v1/sessions/${encodeURIComponent(id)}/export`;
  $('session-links').hidden = false;
  showTrust(id, listed && listed.cwd);
  loadState(id);
  $('todo-panel').hidden = true;
  $('jobs-panel').hidden = true;
  $('job-output').textContent = '';
  loadJobs(id);
  loadCommands(id);
  renderSessions();
  const source = new EventSource(`/api/v1/sessions/${encodeURIComponent(id)}/events`);
  app.source = source;
  const view = app.view;
  // The log's replay is over once the live stream's `pending` comes (a hosted session).
  source.addEventListener('pending', () => {
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
  source.addEventListener('resolved', (m) => view.resolved(JSON.parse(m.data).requestId));
  $('message').focus();
}

// ---- The session's settings: mode, model, effort (`GET`/`POST /api/v1/sessions/{id}/…`). ----

async function loadState(id) {
  let state;
  try {
    state = await api('GET', `/api/v1/sessions/${encodeURIComponent(id)}`);
  } catch (_) {
    return;
  }
  if (app.id !== id) return;
  $('mode').value = state.plan ? 'plan' : state.mode || 'default';
  $('model').value = state.model || '';
  $('effort').value = state.effort || '';
}

async function setting(path, body, what) {
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
async function refused(id) {
  try {
    await api('GET', `/api/v1/sessions/${encodeURIComponent(id)}`);
    showLink('the server refused the event stream: reload the page');
  } catch (e) {
    if (e.status === 401) {
      showLink('the server does not know this page any more (it restarted with a new token): open the URL it printed');
    } else {
      showLink(`this session cannot be shown: ${e.message}`);
    }
  }
}

// ---- Background jobs and subagents (`GET …/jobs`, `GET …/jobs/{jobId}`, `POST …/kill`). ----

async function loadJobs(id) {
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
function dataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

function showAttached() {
  const files = Array.from($('images').files || []);
  $('attached').textContent = files.length ? `${files.length} image${files.length === 1 ? '' : 's'}: ${files.map((f) => f.name).join(', ')}` : '';
}

// ---- `/` commands (`GET …/commands`, `POST …/commands/{name}`). ----

async function loadCommands(id) {
  try {
    const listed = await api('GET', `/api/v1/sessions/${encodeURIComponent(id)}/commands`);
    if (app.id === id) app.commands = listed.commands || [];
  } catch (_) {
    app.commands = [];
  }
}

/** The commands matching what is typed after `/`, offered under the composer. */
function suggestCommands() {
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
async function runCommand(text) {
  const match = /^\/(\S+)\s*([\s\S]*)$/.exec(text.trim());
  if (!match || !(app.commands || []).some((c) => c.name === match[1])) return false;
  try {
    const done = await api('POST', `/api/v1/sessions/${encodeURIComponent(app.id)}/commands/${encodeURIComponent(match[1])}`, { args: match[2] });
    showLink(done && done.message ? done.message : `/${match[1]}: queued`);
  } catch (e) {
    showLink(`/${match[1]}: ${e.message}`);
  }
  return true;
}

async function send() {
  const box = $('message');
  const text = box.value;
  if (!text.trim() || !app.id) return;
  $('commands').hidden = true;
  if (text.startsWith('/') && await runCommand(text)) {
    box.value = '';
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
  const match = /^#\/s\/(.+)$/.exec(location.hash);
  if (match) {
    openSession(decodeURIComponent(match[1]));
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
  $('filter').addEventListener('input', renderSessions);
  $('search-form').addEventListener('submit', (e) => { e.preventDefault(); search($('search').value); });
  $('composer').addEventListener('submit', (e) => { e.preventDefault(); send(); });
  $('stop').addEventListener('click', stop);
  $('images').addEventListener('change', showAttached);
  $('message').addEventListener('input', suggestCommands);
  $('mode').addEventListener('change', () => setting('mode', { mode: $('mode').value }, `mode ${$('mode').value}`));
  $('model').addEventListener('change', () => setting('model', { model: $('model').value.trim() }, `model ${$('model').value.trim()}`));
  $('effort').addEventListener('change', () => {
    if ($('effort').value) setting('model', { effort: $('effort').value }, `effort ${$('effort').value}`);
  });
  $('message').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
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
