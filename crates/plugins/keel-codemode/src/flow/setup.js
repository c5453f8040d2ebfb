// A workflow's globals, evaluated after Code Mode's prelude and before the script. The host
// replaces __ARGS__ with the tool's `args` as a JSON string literal and __LIMIT__ with the
// default `parallel` limit. `tools.agent`, `tools.phase` and `tools.log` are the host's calls;
// the script uses the functions below.
(function (argsText, defaultLimit) {
  'use strict';
  const t = tools;
  const parse = JSON.parse;
  const define = Object.defineProperty;
  const freeze = Object.freeze;
  const PromiseCtor = Promise;
  const ErrorCtor = Error;
  let current = null;

  const agent = function (prompt, opts) {
    const o = opts === undefined || opts === null ? {} : opts;
    if (typeof prompt !== 'string') {
      return PromiseCtor.reject(new ErrorCtor('agent(prompt, opts): prompt must be a string'));
    }
    const call = {
      prompt: prompt,
      schema: o.schema,
      label: o.label,
      phase: o.phase === undefined ? current : o.phase,
      provider: o.provider,
      model: o.model,
    };
    return t.agent(call).then(parse);
  };

  const parallel = async function (items, opts) {
    const list = Array.isArray(items) ? items : [];
    const asked = opts && typeof opts.limit === 'number' ? Math.floor(opts.limit) : defaultLimit;
    const limit = Math.max(1, asked);
    const results = new Array(list.length);
    let next = 0;
    const worker = async function () {
      while (next < list.length) {
        const i = next;
        next += 1;
        const item = list[i];
        results[i] = await (typeof item === 'function' ? item() : item);
      }
    };
    const workers = [];
    for (let w = 0; w < Math.min(limit, list.length); w++) workers.push(worker());
    await PromiseCtor.all(workers);
    return results;
  };

  const pipeline = async function (...steps) {
    const list = steps.length === 1 && Array.isArray(steps[0]) ? steps[0] : steps;
    let previous;
    for (const step of list) {
      previous = await (typeof step === 'function' ? step(previous) : step);
    }
    return previous;
  };

  const phase = function (title) {
    current = String(title);
    return t.phase({ title: current });
  };

  const log = function (...parts) {
    console.log(...parts);
    const text = parts.map(function (p) {
      return typeof p === 'string' ? p : JSON.stringify(p);
    }).join(' ');
    return t.log({ message: text, phase: current });
  };

  const globals = { args: freeze(parse(argsText)), agent, parallel, pipeline, phase, log };
  for (const name of Object.keys(globals)) {
    define(globalThis, name, { value: globals[name], enumerable: false });
  }
})(__ARGS__, __LIMIT__);
