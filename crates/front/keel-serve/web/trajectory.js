// keel's web app (docs/web-app.md): the Trajectory tab: a session as what the agent did, turn
// by turn and step by step: each step's tokens and time, each tool call with what it was
// given, how it ended and how long it took. Kept from the events the Chat tab renders.

import { el } from './lib.js';

export class Trajectory {
  constructor() {
    this.turns = [];
    this.calls = new Map(); // callId -> call
  }

  current() {
    if (!this.turns.length) this.turns.push({ turn: '?', started: null, steps: [], ended: null });
    return this.turns[this.turns.length - 1];
  }

  turnStart(turn, time) {
    this.turns.push({ turn, started: time, steps: [], ended: null, reason: null });
  }

  step(step, usage, took) {
    this.current().steps.push({
      step, took, input: usage.inputTokens || 0, output: usage.outputTokens || 0, calls: [],
    });
  }

  call(id, name, what, time) {
    const turn = this.current();
    if (!turn.steps.length) turn.steps.push({ step: '?', took: null, input: 0, output: 0, calls: [] });
    const call = { id, name, what, started: time, took: null, state: 'running' };
    turn.steps[turn.steps.length - 1].calls.push(call);
    this.calls.set(id, call);
  }

  result(id, failed, time) {
    const call = this.calls.get(id);
    if (!call) return;
    call.state = failed ? 'failed' : 'done';
    if (call.started && time >= call.started) call.took = time - call.started;
  }

  turnEnd(reason, time) {
    const turn = this.current();
    turn.ended = time;
    turn.reason = reason;
  }

  /** The whole trajectory, as nested lists. */
  render() {
    const ms = (t) => (t === null || t === undefined ? '' : t < 1000 ? `${t} ms` : `${(t / 1000).toFixed(1)} s`);
    return el('ol', { class: 'trajectory-turns' }, this.turns.map((t) => el('li', {},
      el('div', { class: 'turn-head' }, `Turn ${t.turn}`,
        el('span', { class: 'info' }, t.ended ? ` ${t.reason || 'completed'} in ${ms(t.ended - t.started)}` : ' running')),
      el('ol', { class: 'trajectory-steps' }, t.steps.map((s) => el('li', {},
        el('span', {}, `Step ${s.step}`),
        el('span', { class: 'info' }, ` ${s.input.toLocaleString('en')} in · ${s.output.toLocaleString('en')} out${s.took ? ` · ${ms(s.took)}` : ''}`),
        s.calls.length ? el('ul', { class: 'trajectory-calls' }, s.calls.map((c) => el('li', { class: `call ${c.state}` },
          el('span', { class: 'name' }, c.name), ' ', el('code', {}, c.what.slice(0, 120)),
          el('span', { class: 'info' }, ` ${c.state}${c.took !== null ? ` · ${ms(c.took)}` : ''}`)))) : null))))));
  }
}
