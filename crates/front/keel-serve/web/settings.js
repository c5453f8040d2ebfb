// keel's web app (docs/web-app.md): settings: the theme and the language (kept in this
// browser), the models and the endpoint's key as the server sees them (`GET /api/v1/models`:
// the key's variable and whether it is set, never its value), and the keyboard shortcuts.

import { $, el, api, showLink, failure } from './lib.js';
import { setLanguage, language } from './i18n.js';
import { showPage } from './pages.js';

const THEME_KEY = 'keel.theme';

/** The theme kept in this browser: `system`, `light` or `dark`. */
export function theme() {
  try {
    return localStorage.getItem(THEME_KEY) || 'system';
  } catch (_) {
    return 'system';
  }
}

/** Apply (and keep) `value`: `light` or `dark` over the system's, `system` to follow it. */
export function setTheme(value) {
  if (value === 'light' || value === 'dark') document.documentElement.dataset.theme = value;
  else delete document.documentElement.dataset.theme;
  try {
    localStorage.setItem(THEME_KEY, value);
  } catch (_) { /* a browser that keeps nothing: this page only */ }
}

export async function showSettings() {
  showPage('settings-page');
  $('theme').value = theme();
  $('language').value = language();
  let models;
  try {
    models = await api('GET', '/api/v1/models');
  } catch (e) {
    showLink(failure('the models cannot be listed', e));
    return;
  }
  $('models').replaceChildren(...(models.models || []).map((m, i) => el('li', {}, m, i === 0 ? el('span', { class: 'info' }, ' (configured)') : null)));
  const ep = models.endpoint;
  $('endpoint').replaceChildren(ep
    ? el('p', {}, `${ep.provider} at ${ep.baseUrl}; `,
      ep.keyVariable
        ? el('span', { class: ep.keySet ? '' : 'notice error' }, `key from $${ep.keyVariable} (${ep.keySet ? 'set' : 'NOT SET: requests fail until it is'})`)
        : 'no key is sent')
    : el('p', { class: 'notice error' }, models.endpointError || 'no endpoint'));
}

export function bindSettings() {
  $('theme').addEventListener('change', () => setTheme($('theme').value));
  $('language').addEventListener('change', () => setLanguage($('language').value));
}
