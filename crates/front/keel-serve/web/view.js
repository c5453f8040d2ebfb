// keel's web app (docs/web-app.md): a session's view: its log rendered event by
// event, and the requests put to the person.

import { $, el, api, renderMarkdown, renderDiff, textOf, showLink, app } from './lib.js';
import { loadSessions } from './app.js';
import { loadState, loadJobs } from './panels.js';
import { presentItems } from './items.js';
import { Trajectory } from './trajectory.js';

/** A duration in ms as people read it: `0.4 s`, `12 s`, `3 min 5 s`. */
function seconds(ms) {
  const s = ms / 1000;
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 60) return `${Math.round(s)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

/**
 * An image of a message: a stored attachment from the server (`GET /api/v1/attachments/…`),
 * a `data:` URL as it is; anything else (a file path, a web URL) named, not loaded.
 */
function imageOf(image, n) {
  const uri = String(image.uri || '');
  const alt = `image ${n} of the message`;
  let src = null;
  if (uri.startsWith('keel-attachment:')) src = `/api/v1/attachments/${encodeURIComponent(uri.slice('keel-attachment:'.length))}`;
  else if (/^data:image\/(png|jpeg|gif|webp);base64,/.test(uri)) src = uri;
  if (!src) return el('span', { class: 'info' }, `[${alt}: ${uri}]`);
  const img = el('img', { src, alt, loading: 'lazy' });
  img.addEventListener('error', () => img.replaceWith(el('span', { class: 'info' }, `[${alt}: not available]`)));
  return el('a', { href: src, target: '_blank', rel: 'noopener' }, img);
}

/** The most of one tool's output a card shows (its head and tail; the HTML export has it all). */
const OUTPUT_SHOWN = 200_000;

/** `text` as a card shows it: whole, or its head and tail around a note of what is left out. */
export function shownOutput(text) {
  if (text.length <= OUTPUT_SHOWN) return text;
  const head = text.slice(0, OUTPUT_SHOWN - 20_000);
  const tail = text.slice(-20_000);
  const left = text.length - head.length - tail.length;
  return `${head}\n\n[… ${left.toLocaleString('en')} characters not shown here: the HTML export has the whole output …]\n\n${tail}`;
}

// ---- A session's view: its log, event by event. ----

export class View {
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
    this.target = null; // the seq of the message a link opened the view on
    this.stats = { turns: 0, steps: 0, input: 0, output: 0, cached: 0, rate: null, window: 0, context: 0 };
    this.stepStarted = new Map(); // "turn/step" -> time of its first chunk
    this.trajectory = new Trajectory();
    this.changes = new Map(); // turn -> what it changed (the rewind points)
    this.ratings = new Map(); // seq of an answer's message -> "up" | "down" | null
    $('stats').textContent = '';
    $('status-items').replaceChildren();
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
    // The last request's share of the model's context window (its prompt and its answer).
    if (s.window && s.context) parts.push(`context ${Math.min(100, Math.round((100 * s.context) / s.window))} %`);
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
      images.length ? el('div', { class: 'images' }, images.map((image, i) => imageOf(image, i + 1))) : null,
      el('div', { class: 'actions' },
        el('button', { type: 'button', class: 'link rewind', 'aria-label': `Rewind to before: ${text.slice(0, 60)}`, onclick: rewind, disabled: this.running }, 'Rewind'),
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
        if (source === 'plugin') {
          // What a plugin put on the person's side (a subagent's task, a scheduled prompt,
          // the runtime context, continuity's re-projection): folded, named by where it came
          // from, as the HTML export shows it.
          const text = textOf(data.content);
          this.append(el('details', { class: 'msg plugin-message' },
            el('summary', {}, el('span', { class: 'info' }, `context from ${data.source.plugin}: `), text.slice(0, 100)),
            renderMarkdown(text)));
          return;
        }
        if (source !== 'user' && source !== undefined) return;
        this.userMessage(ev.seq, textOf(data.content),
          (data.content || []).filter((b) => b && b.type === 'image'));
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
        if (usage.inputTokens) s.context = usage.inputTokens + (usage.outputTokens || 0);
        const started = this.stepStarted.get(`${data.turn}/${data.step}`);
        // A step shorter than a fifth of a second says nothing of the model's speed.
        if (started && ev.time - started >= 200 && usage.outputTokens) {
          s.rate = usage.outputTokens / ((ev.time - started) / 1000);
        }
        this.renderStats();
        this.trajectory.step(data.step, usage, started && ev.time > started ? ev.time - started : null);
        this.message(data, usage);
        this.showTrajectory();
        return;
      }
      case 'request/context':
        this.stats.window = data.contextWindow || 0;
        return;
      case 'tool/call':
        this.toolCall(data, ev.time);
        this.showTrajectory();
        return;
      case 'tool/result':
        this.toolResult(data, ev.time);
        this.showTrajectory();
        return;
      case 'turn/start':
        this.trajectory.turnStart(data.turn, ev.time);
        this.turnStarted = ev.time;
        this.turnFirst = this.transcript.lastElementChild;
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
          this.changedFiles();
        }
        const reason = data.reason ? data.reason.kind : 'completed';
        const took = this.turnStarted && ev.time >= this.turnStarted ? ` in ${seconds(ev.time - this.turnStarted)}` : '';
        this.fold(reason, took);
        this.trajectory.turnEnd(reason, ev.time);
        this.showTrajectory();
        const line = el('div', { class: 'turn-end', 'data-turn': String(data.turn) }, `turn ${data.turn} ${reason}${took}`);
        this.append(line);
        this.showChanges(line);
        return;
      }
      case 'feedback/rated': {
        const key = String(data.seq);
        this.ratings.set(key, data.rating || null);
        const node = this.transcript.querySelector(`[data-message="${CSS.escape(key)}"]`);
        if (node) this.showRating(node, data.rating || null);
        return;
      }
      case 'subagent/descriptor':
        this.subagent(data);
        return;
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
    } else if (chunk.type === 'text-delta') {
      // The answer as Markdown while it streams: its text kept, rendered once per frame.
      const node = step.blocks.get(chunk.index);
      if (!node) return;
      node.raw = (node.raw || '') + (chunk.text || '');
      if (!node.frame) {
        node.frame = requestAnimationFrame(() => {
          node.frame = 0;
          if (node.isConnected) node.replaceChildren(renderMarkdown(node.raw));
          this.follow();
        });
      }
    } else if (chunk.type === 'reasoning-delta') {
      const node = step.blocks.get(chunk.index);
      if (node) node.append(chunk.text || '');
      this.follow();
    }
  }

  message(data, usage) {
    const step = this.step(data);
    step.done = true;
    step.messageSeq = String(this.seq);
    step.node.dataset.message = step.messageSeq;
    const content = (data.message && data.message.content) || [];
    step.node.replaceChildren();
    for (const block of content) {
      if (block.type === 'text' && block.text) step.node.append(renderMarkdown(block.text));
      if (block.type === 'reasoning' && block.text) {
        step.node.append(el('details', { class: 'reasoning' },
          el('summary', {}, 'Thinking'), el('div', { class: 'reasoning-text' }, block.text)));
      }
    }
    const text = content.filter((b) => b.type === 'text' && b.text).map((b) => b.text).join('\n\n');
    if (text) {
      // Copy the answer's text (as the model wrote it: Markdown).
      const copy = el('button', {
        type: 'button', class: 'link', 'aria-label': `Copy: ${text.slice(0, 60)}`,
        onclick: async () => {
          try {
            await navigator.clipboard.writeText(text);
            copy.textContent = 'Copied';
          } catch (e) {
            showLink(`not copied: ${e.message}`);
          }
        },
      }, 'Copy');
      const used = usage && (usage.inputTokens || usage.outputTokens)
        ? el('span', { class: 'usage', title: 'tokens of this step' },
          `${(usage.inputTokens || 0).toLocaleString('en')} in · ${(usage.outputTokens || 0).toLocaleString('en')} out`
          + (usage.cacheReadTokens ? ` · ${(usage.cacheReadTokens).toLocaleString('en')} cached` : ''))
        : null;
      // A link to this answer, on the clipboard (the page opens on it, scrolled and marked).
      const seq = step.node.dataset.seq;
      const share = el('button', {
        type: 'button', class: 'link', 'aria-label': `Link to: ${text.slice(0, 60)}`,
        onclick: async () => {
          const url = `${location.origin}/#/s/${encodeURIComponent(this.id)}/m/${seq}`;
          try {
            await navigator.clipboard.writeText(url);
            share.textContent = 'Link copied';
          } catch (e) {
            showLink(`no link copied: ${e.message}`);
          }
        },
      }, 'Link');
      // Thumbs: the person's rating, kept in the log (`POST …/feedback`), shown again on replay.
      const rate = (rating) => el('button', {
        type: 'button', class: `link rate rate-${rating}`, 'aria-pressed': 'false',
        'aria-label': `${rating === 'up' ? 'Good' : 'Bad'} answer: ${text.slice(0, 60)}`,
        onclick: async (e) => {
          const pressed = e.currentTarget.getAttribute('aria-pressed') === 'true';
          try {
            await api('POST', `/api/v1/sessions/${encodeURIComponent(this.id)}/feedback`,
              { seq: Number(step.messageSeq), rating: pressed ? null : rating });
          } catch (err) {
            showLink(`not rated: ${err.message}`);
          }
        },
      }, rating === 'up' ? '👍' : '👎');
      step.node.append(el('div', { class: 'actions' }, copy, share, rate('up'), rate('down'), used));
      this.showRating(step.node, this.ratings.get(step.messageSeq));
    }
    if (!step.node.childNodes.length) step.node.remove();
  }

  toolCall(data, time) {
    let args = {};
    try { args = typeof data.arguments === 'string' ? JSON.parse(data.arguments) : data.arguments || {}; } catch (_) { args = {}; }
    const what = args.command || args.path || args.file_path || args.pattern || args.query || '';
    this.trajectory.call(data.callId, data.name, String(what), time);
    const output = el('pre', { class: 'output', 'aria-label': `${data.name} output` });
    const diff = typeof args.old_string === 'string' && typeof args.new_string === 'string'
      ? renderDiff(args.old_string, args.new_string, what)
      : null;
    const state = el('span', { class: 'state' }, 'running');
    const card = el('details', { class: 'tool', open: true, 'data-call': data.callId },
      el('summary', {}, el('span', { class: 'name' }, data.name), ' ',
        el('span', { class: 'what' }, what), ' ', state),
      diff,
      output,
      el('div', { class: 'actions graph-actions' }, el('button', {
        type: 'button', class: 'link', 'aria-label': `Formation graph of ${data.name} ${what}`.trim(),
        onclick: (e) => this.graph(data.callId, data.name, card, e.currentTarget),
      }, 'Formation graph')));
    this.cards.set(data.callId, { card, output, state, name: data.name });
    this.append(card);
  }

  toolResult(data, time) {
    const message = data.message || {};
    for (const block of message.content || []) {
      if (block.type !== 'tool-result') continue;
      this.trajectory.result(block.toolCallId, !!block.isError, time);
      const entry = this.cards.get(block.toolCallId);
      if (!entry) continue;
      entry.output.textContent = shownOutput(textOf(block.content));
      entry.state.textContent = block.isError ? 'failed' : 'done';
      entry.card.classList.toggle('error', !!block.isError);
    }
    this.follow();
  }

  /**
   * The files each turn changed, on its end line: the checkpoints plugin's rewind points
   * (`GET …/commands/rewind/choices`), asked of a session the server hosts only (a stored one
   * would be resumed to answer).
   */
  async changedFiles() {
    const listed = app.sessions.find((s) => s.id === this.id);
    if (!this.live && (!listed || listed.status === 'stored')) return;
    let choices;
    try {
      choices = (await api('GET', `/api/v1/sessions/${encodeURIComponent(this.id)}/commands/rewind/choices`)).choices || [];
    } catch (_) {
      return; // no checkpoints plugin: nothing to say
    }
    if (app.view !== this) return;
    // Only a turn that changed files says so.
    for (const c of choices) if (/^It changed:/.test(c.detail || '')) this.changes.set(String(c.args), c.detail.replace(/\.$/, ''));
    for (const line of this.transcript.querySelectorAll('.turn-end')) this.showChanges(line);
  }

  /** An answer's thumbs as its last rating says. */
  showRating(node, rating) {
    for (const b of node.querySelectorAll('.rate')) {
      b.setAttribute('aria-pressed', String(b.classList.contains(`rate-${rating}`)));
    }
  }

  /** What the turn of end line `line` changed, when known, on the line. */
  showChanges(line) {
    const detail = this.changes.get(line.dataset.turn);
    if (!detail) return;
    let files = line.querySelector('.changed');
    if (!files) {
      files = el('span', { class: 'changed' });
      line.append(files);
    }
    files.textContent = ` · ${detail}`;
  }

  /** The Trajectory tab, drawn again (once a frame) while it is the one shown. */
  showTrajectory() {
    const tab = $('trajectory');
    if (tab.hidden || this.trajectoryFrame) return;
    this.trajectoryFrame = requestAnimationFrame(() => {
      this.trajectoryFrame = 0;
      if (app.view === this) tab.replaceChildren(this.trajectory.render());
    });
  }

  /**
   * The turn that just ended, folded: its tool calls, its steps before the answer and the
   * context plugins added go under one "Completed in …" that opens them; the person's messages,
   * the answer (the last step with text) and notices stay in sight.
   */
  fold(reason, took) {
    const nodes = [];
    let node = this.turnFirst ? this.turnFirst.nextElementSibling : this.transcript.firstElementChild;
    for (; node; node = node.nextElementSibling) nodes.push(node);
    const answer = nodes.filter((n) => n.matches('.msg.assistant') && n.querySelector('.md')).pop();
    const folded = nodes.filter((n) => n !== answer
      && (n.matches('.tool, .plugin-message') || (n.matches('.msg.assistant') && !n.querySelector('.md'))
        || (n.matches('.msg.assistant') && answer && n.compareDocumentPosition(answer) & Node.DOCUMENT_POSITION_FOLLOWING)));
    const calls = folded.filter((n) => n.matches('.tool')).length;
    if (!calls && folded.length < 2) return;
    const word = reason === 'completed' ? 'Completed' : reason.charAt(0).toUpperCase() + reason.slice(1);
    const what = calls ? ` · ${calls} tool call${calls === 1 ? '' : 's'}` : '';
    const work = el('details', { class: 'work', 'data-seq': folded[0].dataset.seq },
      el('summary', {}, `${word}${took}${what}`));
    folded[0].before(work);
    work.append(...folded);
  }

  /** A subagent started by a call: its conversation one click away, under the call's card. */
  subagent(data) {
    const link = el('a', {
      href: `#/s/${encodeURIComponent(data.childSession)}`, class: 'subagent',
      'aria-label': `Conversation of ${data.description}`,
    }, `${data.background ? 'background ' : ''}subagent “${data.description}”: its conversation`);
    const entry = data.callId && this.cards.get(data.callId);
    if (entry) entry.output.before(el('p', { class: 'subagent-link' }, link));
    else this.append(el('div', { class: 'marker' }, link));
  }

  /**
   * The formation graph of a tool's result (`GET …/provenance?call=`: the SVG `keel trace`
   * draws), shown under its card as an image (nothing in it runs); a second press hides it.
   */
  async graph(callId, name, card, button) {
    const shown = card.querySelector('.graph');
    if (shown) {
      shown.remove();
      button.setAttribute('aria-expanded', 'false');
      return;
    }
    const path = `/api/v1/sessions/${encodeURIComponent(this.id)}/provenance?call=${encodeURIComponent(callId)}`;
    let node;
    try {
      const response = await fetch(path, { credentials: 'same-origin' });
      const text = await response.text();
      if (!response.ok) {
        let message = text;
        try { message = JSON.parse(text).error.message; } catch (_) { /* the text as it came */ }
        node = el('p', { class: 'graph note' }, `no formation graph: ${message}`);
      } else {
        node = el('figure', { class: 'graph' },
          el('img', { src: `data:image/svg+xml;charset=utf-8,${encodeURIComponent(text)}`, alt: `Formation graph of the ${name} result` }),
          el('figcaption', { class: 'info' }, `how the ${name} result was formed (keel trace result:${callId})`));
      }
    } catch (e) {
      node = el('p', { class: 'graph note' }, `no formation graph: ${e.message}`);
    }
    card.append(node);
    button.setAttribute('aria-expanded', 'true');
  }

  /** The plugins' items an event shows (`event: present`, before the event itself). */
  present(data) {
    presentItems(this, data.seq, data.items || []);
  }

  append(node, seq) {
    if (node.dataset.seq === undefined) node.dataset.seq = String(seq === undefined ? this.seq : seq);
    this.transcript.append(node);
    if (this.target !== null && Number(node.dataset.seq) === this.target) requestAnimationFrame(() => this.reveal(this.target));
    this.follow();
  }

  follow() {
    // A view opened on one message stays on it.
    if (this.target !== null) return;
    const t = this.transcript;
    t.scrollTop = t.scrollHeight;
  }

  /** Show the message of event `seq` (a link to it): scrolled to, marked. */
  reveal(seq) {
    this.target = seq;
    const node = this.transcript.querySelector(`[data-seq="${seq}"]`);
    if (!node) return;
    for (const old of this.transcript.querySelectorAll('.target')) old.classList.remove('target');
    node.classList.add('target');
    node.scrollIntoView({ block: 'center' });
  }

  setRunning(running) {
    this.running = running;
    $('stop').hidden = !running;
    // What the server refuses mid-turn is not offered then: a mode or model switch, a rewind.
    for (const id of ['mode', 'model', 'effort']) $(id).disabled = running;
    for (const b of this.transcript.querySelectorAll('button.rewind')) b.disabled = running;
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
