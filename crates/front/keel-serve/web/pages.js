// keel's web app (docs/web-app.md): the pages beside the sessions: a workspace's plugins and
// MCP servers, each switchable for that workspace (`GET`/`POST /api/v1/plugins`).

import { $, el, api, showLink, app, failure, nameOf } from './lib.js';

/** Show a page of the app in place of the session view (`null`: the session view again). */
export function showPage(name) {
  for (const page of document.querySelectorAll('.page')) page.hidden = page.id !== name;
  const session = name === null;
  for (const id of ['session-head', 'panels', 'tabs']) $(id).hidden = !session;
  if (!session) {
    $('transcript').hidden = true;
    $('trajectory').hidden = true;
  } else {
    showTab('chat');
  }
  if (!session) {
    $('composer').hidden = true;
    $('takeover').hidden = true;
    $('trust').hidden = true;
  }
}

/** Show the session's Chat or Trajectory tab. */
export function showTab(name) {
  const chat = name === 'chat';
  $('transcript').hidden = !chat;
  $('trajectory').hidden = chat;
  $('tab-chat').setAttribute('aria-selected', String(chat));
  $('tab-trajectory').setAttribute('aria-selected', String(!chat));
  if (!chat && app.view) $('trajectory').replaceChildren(app.view.trajectory.render());
}

/** The workspace a page is about: the one asked for, else the open session's, else the newest. */
function workspaceOf(cwd) {
  if (cwd) return cwd;
  const current = app.sessions.find((s) => s.id === app.id) || app.sessions[0];
  return current && current.cwd ? current.cwd : '';
}

// ---- Plugins: `[[plugins]]` rows and MCP servers of a workspace. ----

export async function showPlugins(cwd) {
  showPage('plugins-page');
  const ws = workspaceOf(cwd);
  $('plugins-cwd').value = ws;
  const body = $('plugins-body');
  if (!ws) {
    body.replaceChildren(el('p', { class: 'info' }, 'Name a workspace to see its plugins.'));
    return;
  }
  let listed;
  try {
    listed = await api('GET', `/api/v1/plugins?cwd=${encodeURIComponent(ws)}`);
  } catch (e) {
    body.replaceChildren(el('p', { class: 'notice' }, failure(`the plugins of ${ws} cannot be listed`, e)));
    return;
  }
  renderPlugins(ws, listed);
}

function renderPlugins(ws, listed) {
  const toggle = (kind, row) => async (e) => {
    const box = e.currentTarget;
    box.disabled = true;
    try {
      const after = await api('POST', '/api/v1/plugins', { cwd: ws, kind, name: row.name, enabled: box.checked });
      showLink(`${row.name} ${box.checked ? 'on' : 'off'} in ${after.root}: for sessions started or resumed there from now on`);
      renderPlugins(ws, after);
      closeIdleSessionIn(after.root);
    } catch (err) {
      box.checked = !box.checked;
      box.disabled = false;
      showLink(failure(`${row.name} not switched`, err));
    }
  };
  const rowOf = (kind, row) => {
    const id = `switch-${kind}-${row.name}`;
    return el('li', { class: `extension${row.enabled ? '' : ' off'}` },
      el('input', {
        type: 'checkbox', id, checked: row.enabled, disabled: !row.switchable,
        onchange: toggle(kind, row),
      }),
      ' ', el('label', { for: id, class: 'name' }, row.name),
      row.what && row.what !== row.name ? el('span', { class: 'info' }, ` ${row.what}`) : null,
      row.description ? el('p', { class: 'description' }, row.description) : null,
      row.problem ? el('p', { class: 'notice' }, row.problem) : null,
      el('p', { class: 'info layer' }, row.switchable ? `set by ${row.layer}` : `configured in ${row.layer}: edit that file`));
  };
  const servers = listed.mcpServers || [];
  const skills = listed.skills || [];
  $('plugins-body').replaceChildren(
    el('p', { class: 'info' }, `Switches apply to ${listed.root} alone and are kept in your own configuration, never in the repository.`),
    el('h3', {}, 'Plugins'),
    el('ul', { class: 'extensions', 'aria-label': 'Plugins' }, (listed.plugins || []).map((r) => rowOf('plugin', r))),
    el('h3', {}, 'MCP servers'),
    servers.length
      ? el('ul', { class: 'extensions', 'aria-label': 'MCP servers' }, servers.map((r) => rowOf('mcp', r)))
      : el('p', { class: 'info' }, 'No MCP server is configured (keel mcp add NAME -- COMMAND, or the project’s .mcp.json).'),
    el('h3', {}, 'Skills'),
    skills.length
      ? el('ul', { class: 'extensions', 'aria-label': 'Skills' }, skills.map((k) => el('li', { class: `extension${k.enabled ? '' : ' off'}` },
        el('span', { class: 'name' }, k.name), el('span', { class: 'info' }, ` ${k.enabled ? '' : '(off with the skills plugin) '}`),
        el('p', { class: 'description' }, k.description),
        el('p', { class: 'info layer' }, k.what))))
      : el('p', { class: 'info' }, 'No skill is found (SKILL.md folders in the project, once trusted, and in your home).'));
}

/**
 * A hosted session keeps the agent it was built with: the open session of that workspace, when
 * idle, is closed, so its next message resumes it with the switch.
 */
async function closeIdleSessionIn(root) {
  const current = app.sessions.find((s) => s.id === app.id);
  if (!current || !current.cwd || !current.cwd.startsWith(root) || current.status === 'running') return;
  await api('POST', `/api/v1/sessions/${encodeURIComponent(current.id)}/close`, {}).catch(() => null);
}

// ---- Automation: the schedules of the sessions the server hosts (`GET /api/v1/schedules`),
// made and deleted through each session's `/schedule` command. ----

export async function showAutomation() {
  showPage('automation-page');
  const hosted = app.sessions.filter((s) => s.status !== 'stored');
  const picker = $('schedule-session');
  const kept = picker.value;
  picker.replaceChildren(...hosted.map((s) => el('option', { value: s.id }, nameOf(s, s.id))));
  if (hosted.some((s) => s.id === kept)) picker.value = kept;
  else if (hosted.some((s) => s.id === app.id)) picker.value = app.id;
  let listed;
  try {
    listed = await api('GET', '/api/v1/schedules');
  } catch (e) {
    showLink(failure('the schedules cannot be listed', e));
    return;
  }
  const rows = listed.schedules || [];
  const list = $('schedules');
  list.replaceChildren(...rows.map((s) => {
    const title = s.title || nameOf(app.sessions.find((x) => x.id === s.session), s.session);
    const how = s.everySeconds ? `every ${every(s.everySeconds)}` : 'once';
    return el('li', { class: 'schedule' },
      el('span', { class: 'name' }, s.id), ` ${how}, next ${new Date(s.dueAt).toLocaleString()} · `,
      el('a', { href: `#/s/${encodeURIComponent(s.session)}` }, title),
      el('p', { class: 'prompt' }, s.prompt),
      el('button', {
        type: 'button', class: 'link', 'aria-label': `Delete ${s.id} of ${title}`,
        onclick: () => schedule(s.session, `delete ${s.id}`),
      }, 'Delete'));
  }));
  if (!rows.length) list.append(el('li', { class: 'info' }, 'No schedules.'));
}

function every(seconds) {
  if (seconds % 3600 === 0) return `${seconds / 3600} h`;
  if (seconds % 60 === 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}

/** `/schedule ARGS` in session `id`, then the list again. */
async function schedule(id, args) {
  try {
    const done = await api('POST', `/api/v1/sessions/${encodeURIComponent(id)}/commands/schedule`, { args });
    showLink(done && done.message ? done.message : 'done');
  } catch (e) {
    showLink(failure('/schedule', e));
  }
  showAutomation();
}

export function submitSchedule() {
  const id = $('schedule-session').value;
  const prompt = $('schedule-prompt').value.trim().replace(/\s+/g, ' ');
  if (!id) {
    showLink('no session to schedule in: start one first');
    return;
  }
  const seconds = Number($('schedule-interval').value) * Number($('schedule-unit').value);
  schedule(id, `${$('schedule-repeat').checked ? 'every' : 'in'} ${seconds} ${prompt}`);
  $('schedule-prompt').value = '';
}
