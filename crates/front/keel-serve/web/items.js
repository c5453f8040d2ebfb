// keel's web app (docs/web-app.md): the plugins' items, as every front end shows them
// (`event: present` of the event stream, docs/serve.md "Plugins' items"): notices, markers,
// a call's progress (a workflow's agents, ralph's rounds), status items (the goal), files
// presented, outcomes. The page knows no plugin's events, only these items.

import { $, el, api, showLink } from './lib.js';

/** Render `items` (shown by the event at `seq`) into `view`. */
export function presentItems(view, seq, items) {
  for (const item of items) {
    switch (item.kind) {
      case 'notice':
        view.append(el('div', { class: `notice ${item.level}`, role: item.level === 'error' ? 'alert' : null },
          item.text, (item.detail || []).map((d) => el('div', { class: 'info' }, d))), seq);
        break;
      case 'marker':
        view.append(el('div', { class: 'marker' }, item.text), seq);
        break;
      case 'outcome':
        view.append(el('div', { class: `marker outcome${item.code ? ' failed' : ''}` }, item.text), seq);
        break;
      case 'progress':
        progress(view, item.callId, item.step);
        break;
      case 'status':
        status(view, item.key, item.text);
        break;
      case 'files':
        view.append(files(view.id, item.files || []), seq);
        break;
      default:
    }
  }
}

/** A step of a call's progress, in a tree under its card (children updated in place). */
function progress(view, callId, step) {
  const entry = view.cards.get(callId);
  if (!entry) return;
  let tree = entry.card.querySelector('.progress');
  if (!tree) {
    tree = el('ul', { class: 'progress', 'aria-label': `Progress of ${entry.name}` });
    entry.output.before(tree);
  }
  if (step.kind === 'title') {
    entry.card.querySelector('.what').textContent = step.text;
  } else if (step.kind === 'child') {
    const key = `child-${step.key}`;
    let row = [...tree.children].find((li) => li.dataset.key === key);
    if (!row) {
      row = el('li', { class: 'child', 'data-key': key });
      tree.append(row);
    }
    row.className = `child ${step.state}`;
    row.replaceChildren(el('span', { class: 'label' }, step.label), ' ',
      el('span', { class: 'state' }, step.state), step.error ? el('span', { class: 'error' }, ` ${step.error}`) : null);
  } else {
    tree.append(el('li', { class: step.kind }, step.text));
  }
}

/** A status item: the goal gets its bar above the composer; any other a chip in the head. */
function status(view, key, text) {
  if (key === 'goal') {
    $('goal-text').textContent = text || '';
    $('goal').hidden = !text;
    view.goal = text;
    return;
  }
  const strip = $('status-items');
  let chip = [...strip.children].find((c) => c.dataset.key === key);
  if (!text) {
    if (chip) chip.remove();
    return;
  }
  if (!chip) {
    chip = el('span', { class: 'chip', 'data-key': key });
    strip.append(chip);
  }
  chip.textContent = text;
}

/** Files presented: each one click from its bytes (`GET …/files/content`, served safely). */
function files(id, list) {
  const base = `/api/v1/sessions/${encodeURIComponent(id)}/files/content?path=`;
  return el('div', { class: 'files' },
    el('div', { class: 'info' }, 'Files presented'),
    el('ul', { 'aria-label': 'Files presented' }, list.map((f) => el('li', {},
      el('a', { href: base + encodeURIComponent(f.path), target: '_blank', rel: 'noopener' }, f.path),
      f.description ? el('span', { class: 'info' }, ` — ${f.description}`) : null))));
}

/** `/goal WORD` for the goal bar's buttons. */
export async function goalCommand(id, word) {
  try {
    const done = await api('POST', `/api/v1/sessions/${encodeURIComponent(id)}/commands/goal`, { args: word });
    showLink(done && done.message ? done.message : `goal ${word}`);
  } catch (e) {
    showLink(`/goal ${word}: ${e.message}`);
  }
}
